//===- BatchNormTest.cpp - BatchNormalization cpu kernel (inference) ------===//
#include "KernelCallHelpers.h"
#include "gtest/gtest.h"

using namespace zinc;
using namespace zinc::cpu;
using namespace zinc::cpu::test;

namespace {

// Per channel: (x - mean) / sqrt(var + eps) * scale + B, with eps chosen
// so that sqrt(var + eps) is exact.
TEST(BatchNormTest, PerChannel) {
  auto x = OwnedTensor::f32({2, 2, 2}, {1, 3, 10, 20, 5, 7, 30, 40});
  auto scale = OwnedTensor::f32({2}, {2, 1});
  auto bias = OwnedTensor::f32({2}, {1, -1});
  auto mean = OwnedTensor::f32({2}, {3, 20});
  auto var = OwnedTensor::f32({2}, {3.75, 24.75});
  OwnedTensor y(DType::F32, {2, 2, 2});
  EXPECT_EQ(errorText(runKernel(runBatchNormalization, "BatchNormalization",
                                attrs({floatAttr("epsilon", 0.25)}),
                                {&x, &scale, &bias, &mean, &var}, {&y})),
            "");
  EXPECT_EQ(y.f32s(), (std::vector<double>{-1, 1, -3, -1, 3, 5, 1, 3}));
}

// Opset 15 allows f32 statistics for an f16 input.
TEST(BatchNormTest, HalfInputFloatStatistics) {
  auto x = OwnedTensor::of<Half>(DType::F16, {1, 1, 2}, {2, 4});
  auto one = OwnedTensor::f32({1}, {1});
  auto zero = OwnedTensor::f32({1}, {0});
  auto mean = OwnedTensor::f32({1}, {3});
  OwnedTensor y(DType::F16, {1, 1, 2});
  EXPECT_EQ(errorText(runKernel(runBatchNormalization, "BatchNormalization",
                                attrs({floatAttr("epsilon", 0.0)}),
                                {&x, &one, &zero, &mean, &one}, {&y}, 15)),
            "");
  EXPECT_EQ(y.values<Half>(), (std::vector<double>{-1, 1}));
}

// Before opset 9, spatial=0 gives every activation its own statistics.
TEST(BatchNormTest, PerActivationBeforeOpset9) {
  auto x = OwnedTensor::f32({2, 1, 2}, {1, 2, 3, 4});
  auto scale = OwnedTensor::f32({1, 2}, {1, 10});
  auto bias = OwnedTensor::f32({1, 2}, {0, 0});
  auto mean = OwnedTensor::f32({1, 2}, {1, 2});
  auto var = OwnedTensor::f32({1, 2}, {1, 1});
  OwnedTensor y(DType::F32, {2, 1, 2});
  EXPECT_EQ(errorText(runKernel(
                runBatchNormalization, "BatchNormalization",
                attrs({intAttr("spatial", 0), floatAttr("epsilon", 0.0)}),
                {&x, &scale, &bias, &mean, &var}, {&y}, 7)),
            "");
  EXPECT_EQ(y.f32s(), (std::vector<double>{0, 0, 2, 20}));
}

// Training mode, asked by attribute or by extra outputs, is refused.
TEST(BatchNormTest, TrainingModeIsUnsupported) {
  auto x = OwnedTensor::f32({1, 1, 2}, {1, 2});
  auto p = OwnedTensor::f32({1}, {1});
  OwnedTensor y(DType::F32, {1, 1, 2}), runMean(DType::F32, {1}),
      runVar(DType::F32, {1});
  std::string byAttr = errorText(runKernel(
      runBatchNormalization, "BatchNormalization",
      attrs({intAttr("training_mode", 1)}), {&x, &p, &p, &p, &p}, {&y}));
  EXPECT_EQ(byAttr, "unsupported: BatchNormalization in training mode");
  std::string byOutputs = errorText(
      runKernel(runBatchNormalization, "BatchNormalization", attrs({}),
                {&x, &p, &p, &p, &p}, {&y, &runMean, &runVar}, 14));
  EXPECT_EQ(byOutputs, "unsupported: BatchNormalization in training mode");
  // Absent optional outputs are not a training request.
  EXPECT_EQ(errorText(runKernel(runBatchNormalization, "BatchNormalization",
                                attrs({}), {&x, &p, &p, &p, &p},
                                {&y, nullptr, nullptr}, 14)),
            "");
}

// Statistics of the wrong length are an error.
TEST(BatchNormTest, WrongParameterShapeIsError) {
  auto x = OwnedTensor::f32({1, 2, 2}, {1, 2, 3, 4});
  auto p = OwnedTensor::f32({3}, {1, 1, 1});
  OwnedTensor y(DType::F32, {1, 2, 2});
  EXPECT_NE(errorText(runKernel(runBatchNormalization, "BatchNormalization",
                                attrs({}), {&x, &p, &p, &p, &p}, {&y})),
            "");
}

} // namespace
