//===- PlanFileTest.cpp - Plan containers: round trip and corruption ------===//
#include "zinc/plan/PlanFile.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "gtest/gtest.h"

using namespace zinc::plan;

static Plan samplePlan() {
  Plan p;
  p.set_mode("infer");
  p.set_model_path("/models/m.onnx");
  p.set_opset_version(17);
  p.set_loss(-1);
  Tensor *t = p.add_tensors();
  t->set_id(0);
  t->set_name("x");
  t->set_dtype(1);
  t->add_shape(2);
  t->add_shape(3);
  t->set_size_bytes(24);
  Instruction *i = p.add_instructions();
  i->set_name("Relu_0");
  i->set_op("Relu");
  i->add_inputs(0);
  i->add_outputs(0);
  return p;
}

static std::string errorOf(llvm::Expected<Plan> p) {
  EXPECT_FALSE(static_cast<bool>(p));
  return p ? "" : llvm::toString(p.takeError());
}

TEST(PlanFileTest, BinaryAndTextRoundTrip) {
  for (PlanEncoding enc : {PlanEncoding::Binary, PlanEncoding::Text}) {
    std::string bytes = encodePlan(samplePlan(), enc);
    auto back = decodePlan(bytes);
    ASSERT_TRUE(static_cast<bool>(back)) << llvm::toString(back.takeError());
    EXPECT_EQ(back->SerializeAsString(), samplePlan().SerializeAsString());
  }
}

TEST(PlanFileTest, EncodingIsDeterministic) {
  EXPECT_EQ(encodePlan(samplePlan(), PlanEncoding::Binary),
            encodePlan(samplePlan(), PlanEncoding::Binary));
}

TEST(PlanFileTest, RejectsAFileThatIsNotAPlan) {
  EXPECT_NE(errorOf(decodePlan("hello world, not a plan")).find("not a zinc plan"),
            std::string::npos);
}

TEST(PlanFileTest, RejectsATruncatedPlan) {
  std::string bytes = encodePlan(samplePlan(), PlanEncoding::Binary);
  EXPECT_NE(errorOf(decodePlan(llvm::StringRef(bytes).drop_back(3))).find("truncated"),
            std::string::npos);
  EXPECT_NE(errorOf(decodePlan(llvm::StringRef(bytes).take_front(20))).find("truncated"),
            std::string::npos);
}

TEST(PlanFileTest, RejectsAFlippedBit) {
  for (PlanEncoding enc : {PlanEncoding::Binary, PlanEncoding::Text}) {
    std::string bytes = encodePlan(samplePlan(), enc);
    bytes[bytes.size() - 5] ^= 0x10;
    EXPECT_NE(errorOf(decodePlan(bytes)).find("checksum mismatch"), std::string::npos);
  }
}

TEST(PlanFileTest, RejectsAnotherFormatVersion) {
  std::string bytes = encodePlan(samplePlan(), PlanEncoding::Binary);
  bytes[8] = static_cast<char>(kPlanFormatVersion + 1);
  std::string expected =
      "format version " + std::to_string(kPlanFormatVersion + 1) + " is not supported";
  EXPECT_NE(errorOf(decodePlan(bytes)).find(expected), std::string::npos);
}

/// A fresh path in a fresh directory of the test's own.
static std::string scratchPath(llvm::StringRef name) {
  llvm::SmallString<128> dir;
  EXPECT_FALSE(llvm::sys::fs::createUniqueDirectory("zinc-planfile", dir));
  llvm::sys::path::append(dir, name);
  return std::string(dir);
}

TEST(PlanFileTest, AStagedPlanAppearsOnlyWhenCommitted) {
  std::string path = scratchPath("p.zplan");
  std::string bytes = encodePlan(samplePlan(), PlanEncoding::Binary);
  {
    auto staged = stagePlanFile(bytes, path);
    ASSERT_TRUE(static_cast<bool>(staged)) << llvm::toString(staged.takeError());
    EXPECT_FALSE(llvm::sys::fs::exists(path));
  }
  // Dropped uncommitted (a plan the verifier refused): nothing is left.
  EXPECT_FALSE(llvm::sys::fs::exists(path));
  EXPECT_FALSE(llvm::sys::fs::exists(path + ".tmp"));
  {
    auto staged = stagePlanFile(bytes, path);
    ASSERT_TRUE(static_cast<bool>(staged));
    EXPECT_FALSE(static_cast<bool>(staged->commit()));
  }
  EXPECT_FALSE(llvm::sys::fs::exists(path + ".tmp"));
  auto back = readPlanFile(path);
  ASSERT_TRUE(static_cast<bool>(back)) << llvm::toString(back.takeError());
  EXPECT_EQ(back->instructions(0).name(), "Relu_0");
  llvm::sys::fs::remove(path);
  llvm::sys::fs::remove(llvm::sys::path::parent_path(path));
}

TEST(PlanFileTest, StagingIntoAMissingDirectorySaysSo) {
  auto staged = stagePlanFile("bytes", "/nonexistent-zinc-dir/p.zplan");
  ASSERT_FALSE(static_cast<bool>(staged));
  EXPECT_EQ(llvm::toString(staged.takeError()),
            "/nonexistent-zinc-dir/p.zplan: cannot write: No such file or "
            "directory");
}
