//===- OpEffectsTest.cpp - The declared effects of zinc's ops -------------===//
#include "zinc/ops/OpEffects.h"
#include "gtest/gtest.h"

using namespace zinc;

namespace {

std::vector<unsigned> written(llvm::StringRef op, unsigned operands) {
  std::vector<unsigned> out;
  const OpEffects *e = lookupOpEffects(kZincDomain, op);
  for (unsigned i = 0; e && i < operands; ++i)
    if (e->writesInput(i))
      out.push_back(i);
  return out;
}

TEST(OpEffects, OnnxOpsArePure) {
  const OpEffects *e = lookupOpEffects("", "MatMul");
  ASSERT_NE(e, nullptr);
  EXPECT_FALSE(e->updatesInPlace());
  EXPECT_FALSE(lookupOpEffects("", "NoSuchOnnxOp")->updatesInPlace());
  EXPECT_FALSE(isTransferOp("", "Copy"));
}

TEST(OpEffects, OptimizersWriteParamStatesAndCopyNotTheGradient) {
  // (param, grad, m, v, copy, found_inf, scale, applied)
  EXPECT_EQ(written("AdamW", 8), (std::vector<unsigned>{0, 2, 3, 4}));
  EXPECT_EQ(written("Adam", 8), (std::vector<unsigned>{0, 2, 3, 4}));
  // (param, grad, momentum, copy, found_inf, scale, applied)
  EXPECT_EQ(written("SGD", 7), (std::vector<unsigned>{0, 2, 3}));
}

TEST(OpEffects, TheOverflowCheckWritesOnlyItsFlag) {
  // (found_inf, scale, grads...): the gradients are read.
  EXPECT_EQ(written("CheckFiniteGrads", 40), (std::vector<unsigned>{0}));
  EXPECT_EQ(written("UpdateLossScale", 4), (std::vector<unsigned>{0, 1, 3}));
  // The first step starts the scale (0 until then) in place: a host
  // update's copy of the scale must come after it.
  EXPECT_EQ(written("LossScale", 1), (std::vector<unsigned>{0}));
}

TEST(OpEffects, Collectives) {
  EXPECT_EQ(written("AllReduce", 1), (std::vector<unsigned>{0}));
  EXPECT_EQ(written("ReduceScatter", 1), (std::vector<unsigned>{}));
  EXPECT_EQ(written("AllGather", 1), (std::vector<unsigned>{}));
  EXPECT_EQ(written("ShardOf", 1), (std::vector<unsigned>{}));
}

TEST(OpEffects, TransfersAndGradients) {
  EXPECT_TRUE(isTransferOp(kZincDomain, "Copy"));
  EXPECT_TRUE(isTransferOp(kZincDomain, "CopyInto"));
  EXPECT_FALSE(isTransferOp(kZincDomain, "AdamW"));
  EXPECT_EQ(written("Copy", 1), (std::vector<unsigned>{}));
  EXPECT_EQ(written("CopyInto", 2), (std::vector<unsigned>{1}));
  EXPECT_EQ(written("SoftmaxGrad", 3), (std::vector<unsigned>{}));
}

TEST(OpEffects, UndeclaredZincOpsAreUnknownAndConservative) {
  EXPECT_EQ(lookupOpEffects(kZincDomain, "Evict"), nullptr);
  const OpEffects &e = opEffects(kZincDomain, "Evict");
  EXPECT_TRUE(e.writesInput(0));
  EXPECT_TRUE(e.writesInput(57));
}

} // namespace
