//===- OpDefinitionTest.cpp - The op definitions agree with themselves ----===//
#include "zinc/ops/OpDefinition.h"
#include "gtest/gtest.h"
#include <set>

using namespace zinc;
using namespace zinc::ops;

namespace {

TEST(OpDefinition, EachOpIsDefinedOncePerDomain) {
  std::set<std::string> seen;
  for (const OpDefinition &d : allOps())
    EXPECT_TRUE(seen.insert(d.qualifiedName()).second)
        << d.qualifiedName() << " is defined twice in Ops.def";
  EXPECT_GT(seen.size(), 100u);
}

TEST(OpDefinition, LookupFindsEachDefinitionByDomainAndName) {
  for (const OpDefinition &d : allOps())
    EXPECT_EQ(lookupOp(d.domain, d.name), &d) << d.qualifiedName();
  EXPECT_EQ(lookupOp("", "NoSuchOp"), nullptr);
  EXPECT_EQ(lookupOp(kZincDomain, "MatMul"), nullptr); // ONNX's, not zinc's
  EXPECT_EQ(lookupOp("", "AdamW"), nullptr);           // zinc's, not ONNX's
  EXPECT_EQ(lookupOp("com.microsoft", "MatMul"), nullptr);
}

TEST(OpDefinition, OnnxOpsArePureAcceptTypesAndRunOnTheCpu) {
  for (const OpDefinition &d : allOps()) {
    if (d.kind != OpKind::Onnx)
      continue;
    EXPECT_TRUE(d.domain.empty()) << d.qualifiedName();
    EXPECT_FALSE(d.effects.updatesInPlace()) << d.qualifiedName();
    EXPECT_TRUE(d.types.contains(DType::F32) || d.types.contains(DType::Bool))
        << d.qualifiedName();
    // The cpu backend is the reference: it runs every op (CI has no GPU).
    EXPECT_TRUE(d.hasKernelOn(Cpu)) << d.qualifiedName();
  }
}

TEST(OpDefinition, FoldOnlyOpsRunNowhere) {
  unsigned count = 0;
  for (const OpDefinition &d : allOps()) {
    if (d.kind != OpKind::FoldOnly)
      continue;
    ++count;
    EXPECT_EQ(d.backends, NoKernel) << d.qualifiedName();
    EXPECT_FALSE(d.types.contains(DType::F32)) << d.qualifiedName();
  }
  EXPECT_EQ(count, 3u); // Abs, Floor, Ceil
  ASSERT_NE(lookupOp("", "Abs"), nullptr);
  EXPECT_EQ(lookupOp("", "Abs")->kind, OpKind::FoldOnly);
}

TEST(OpDefinition, TransfersHaveNoKernelAndEveryOtherZincOpRunsOnTheCpu) {
  for (const OpDefinition &d : allOps()) {
    if (d.kind != OpKind::Zinc)
      continue;
    EXPECT_EQ(d.domain, kZincDomain);
    if (d.hasTrait(Transfer))
      EXPECT_EQ(d.backends, NoKernel) << d.qualifiedName();
    else
      EXPECT_TRUE(d.hasKernelOn(Cpu)) << d.qualifiedName();
  }
  EXPECT_TRUE(isTransferOp(kZincDomain, "Copy"));
  EXPECT_TRUE(isTransferOp(kZincDomain, "CopyInto"));
  EXPECT_FALSE(isTransferOp(kZincDomain, "AdamW"));
}

TEST(OpDefinition, OptimizerUpdatesWriteTheirParameter) {
  std::set<std::string> optimizers;
  for (const OpDefinition &d : allOps())
    if (d.hasTrait(OptimizerUpdate)) {
      optimizers.insert(d.name.str());
      EXPECT_TRUE(d.effects.writesInput(0)) << d.qualifiedName();
      EXPECT_FALSE(d.effects.writesInput(1))
          << d.qualifiedName(); // the gradient
    }
  EXPECT_EQ(optimizers, (std::set<std::string>{"Adam", "AdamW", "SGD"}));
}

TEST(OpDefinition, WorkspaceColumnSizesTheKernelCall) {
  // A 16-bit MatMul widens blocks to f32; an f32 one needs nothing; an op
  // without a Workspace column never takes any.
  int64_t a[] = {4, 8}, b[] = {8, 16}, y[] = {4, 16};
  AttributeList none;
  KernelOperand half[] = {{DType::F16, a, true}, {DType::F16, b, true}};
  KernelOperand out[] = {{DType::F16, y, true}};
  EXPECT_GT(kernelWorkspaceBytes("", "MatMul", 17, half, out, none), 0u);
  EXPECT_EQ(kernelWorkspaceBytes("", "Add", 17, half, out, none), 0u);
  EXPECT_EQ(kernelWorkspaceBytes("other", "MatMul", 17, half, out, none), 0u);
  EXPECT_NE(lookupOp("", "MatMul")->workspace, nullptr);
  EXPECT_EQ(lookupOp("", "Add")->workspace, nullptr);
}

} // namespace
