//===- PoolTest.cpp - MaxPool, AveragePool, GlobalAveragePool cpu kernels -===//
#include "KernelCallHelpers.h"
#include "gtest/gtest.h"
#include <cmath>

using namespace zinc;
using namespace zinc::cpu;
using namespace zinc::cpu::test;

namespace {

std::vector<double> iotaValues(int64_t n) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i)
    v[i] = static_cast<double>(i);
  return v;
}

struct MaxResult {
  std::vector<double> values, indices;
};

MaxResult maxPool(const AttributeList &a, const OwnedTensor &x,
                  llvm::ArrayRef<int64_t> yShape) {
  OwnedTensor y(x.ref.dtype, yShape), idx(DType::I64, yShape);
  EXPECT_EQ(errorText(runKernel(runMaxPool, "MaxPool", a, {&x}, {&y, &idx})),
            "");
  return {y.f32s(), idx.i64s()};
}

std::vector<double> averagePool(const AttributeList &a, const OwnedTensor &x,
                                llvm::ArrayRef<int64_t> yShape) {
  OwnedTensor y(DType::F32, yShape);
  EXPECT_EQ(errorText(runKernel(runAveragePool, "AveragePool", a, {&x}, {&y})),
            "");
  return y.f32s();
}

// 2x2 windows with stride 2; indices count from the start of the tensor,
// so the second channel's start at 16.
TEST(MaxPoolTest, IndicesRowMajor) {
  auto x = OwnedTensor::f32({1, 2, 4, 4}, iotaValues(32));
  MaxResult r = maxPool(
      attrs({intsAttr("kernel_shape", {2, 2}), intsAttr("strides", {2, 2})}), x,
      {1, 2, 2, 2});
  EXPECT_EQ(r.values, (std::vector<double>{5, 7, 13, 15, 21, 23, 29, 31}));
  EXPECT_EQ(r.indices, (std::vector<double>{5, 7, 13, 15, 21, 23, 29, 31}));
}

// storage_order 1 numbers the spatial positions column-major: (h, w) is
// h + w * H.
TEST(MaxPoolTest, IndicesColumnMajor) {
  auto x = OwnedTensor::f32({1, 2, 4, 4}, iotaValues(32));
  MaxResult r =
      maxPool(attrs({intsAttr("kernel_shape", {2, 2}),
                     intsAttr("strides", {2, 2}), intAttr("storage_order", 1)}),
              x, {1, 2, 2, 2});
  EXPECT_EQ(r.indices, (std::vector<double>{5, 13, 7, 15, 21, 29, 23, 31}));
}

// Pads are never the maximum, even when every input is negative.
TEST(MaxPoolTest, PadsAreIgnored) {
  auto x = OwnedTensor::f32({1, 1, 3}, {-3, -1, -2});
  MaxResult r =
      maxPool(attrs({intsAttr("kernel_shape", {3}), intsAttr("pads", {1, 1})}),
              x, {1, 1, 3});
  EXPECT_EQ(r.values, (std::vector<double>{-1, -1, -1}));
  EXPECT_EQ(r.indices, (std::vector<double>{1, 1, 1}));
}

// Dilation 2 compares x[o] with x[o+2].
TEST(MaxPoolTest, Dilation) {
  auto x = OwnedTensor::f32({1, 1, 5}, {0, 5, 1, 6, 2});
  MaxResult r = maxPool(
      attrs({intsAttr("kernel_shape", {2}), intsAttr("dilations", {2})}), x,
      {1, 1, 3});
  EXPECT_EQ(r.values, (std::vector<double>{1, 6, 2}));
  EXPECT_EQ(r.indices, (std::vector<double>{2, 3, 4}));
}

// ceil_mode adds the partial last window; floor mode drops it.
TEST(MaxPoolTest, CeilMode) {
  auto x = OwnedTensor::f32({1, 1, 5}, {1, 2, 3, 4, 5});
  AttributeList a =
      attrs({intsAttr("kernel_shape", {2}), intsAttr("strides", {2})});
  EXPECT_EQ(maxPool(a, x, {1, 1, 2}).values, (std::vector<double>{2, 4}));
  AttributeList ceil =
      attrs({intsAttr("kernel_shape", {2}), intsAttr("strides", {2}),
             intAttr("ceil_mode", 1)});
  MaxResult r = maxPool(ceil, x, {1, 1, 3});
  EXPECT_EQ(r.values, (std::vector<double>{2, 4, 5}));
  EXPECT_EQ(r.indices, (std::vector<double>{1, 3, 4}));
  // Without ceil_mode the partial window is not an accepted output size.
  OwnedTensor y(DType::F32, {1, 1, 3});
  EXPECT_NE(errorText(runKernel(runMaxPool, "MaxPool", a, {&x}, {&y})), "");
}

// SAME_LOWER pads the start; 3-D windows and integer types are exact.
TEST(MaxPoolTest, SameLowerThreeDIntegers) {
  auto x = OwnedTensor::of<uint8_t>(DType::U8, {1, 1, 1, 1, 3}, {7, 200, 3});
  OwnedTensor y(DType::U8, {1, 1, 1, 1, 3});
  EXPECT_EQ(errorText(runKernel(runMaxPool, "MaxPool",
                                attrs({intsAttr("kernel_shape", {1, 1, 2}),
                                       stringAttr("auto_pad", "SAME_LOWER")}),
                                {&x}, {&y})),
            "");
  EXPECT_EQ(y.values<uint8_t>(), (std::vector<double>{7, 200, 200}));
  auto xi = OwnedTensor::of<int32_t>(DType::I32, {1, 1, 3}, {-7, -9, -3});
  OwnedTensor yi(DType::I32, {1, 1, 3});
  EXPECT_EQ(errorText(runKernel(runMaxPool, "MaxPool",
                                attrs({intsAttr("kernel_shape", {2}),
                                       stringAttr("auto_pad", "SAME_UPPER")}),
                                {&xi}, {&yi})),
            "");
  EXPECT_EQ(yi.values<int32_t>(), (std::vector<double>{-7, -3, -3}));
}

// A NaN in a window makes that window's maximum NaN (PyTorch's rule).
TEST(MaxPoolTest, NaNPropagates) {
  auto x = OwnedTensor::f32({1, 1, 3}, {1, NAN, 2});
  MaxResult r = maxPool(attrs({intsAttr("kernel_shape", {2})}), x, {1, 1, 2});
  EXPECT_TRUE(std::isnan(r.values[0]) && std::isnan(r.values[1]));
  EXPECT_EQ(r.indices, (std::vector<double>{1, 1}));
}

// A window that reads only padding has no maximum: refused, not guessed.
TEST(MaxPoolTest, WindowOnlyInPaddingIsUnsupported) {
  auto x = OwnedTensor::f32({1, 1, 1}, {1});
  OwnedTensor y(DType::F32, {1, 1, 1});
  std::string msg = errorText(
      runKernel(runMaxPool, "MaxPool",
                attrs({intsAttr("kernel_shape", {2}),
                       intsAttr("dilations", {2}), intsAttr("pads", {1, 1})}),
                {&x}, {&y}));
  EXPECT_NE(msg.find("unsupported"), std::string::npos) << msg;
}

// count_include_pad decides whether pads count in the divisor.
TEST(AveragePoolTest, CountIncludePad) {
  auto x = OwnedTensor::f32({1, 1, 3}, {1, 2, 3});
  AttributeList ex =
      attrs({intsAttr("kernel_shape", {3}), intsAttr("pads", {1, 1})});
  EXPECT_EQ(averagePool(ex, x, {1, 1, 3}), (std::vector<double>{1.5, 2, 2.5}));
  AttributeList in =
      attrs({intsAttr("kernel_shape", {3}), intsAttr("pads", {1, 1}),
             intAttr("count_include_pad", 1)});
  std::vector<double> got = averagePool(in, x, {1, 1, 3});
  EXPECT_EQ(got[0], 1);
  EXPECT_EQ(got[1], 2);
  EXPECT_FLOAT_EQ(got[2], 5.0f / 3.0f);
}

// In ceil mode the last window's part past the end pad is not counted,
// even with count_include_pad (as PyTorch and the spec's reference).
TEST(AveragePoolTest, CeilModeDivisor) {
  auto x = OwnedTensor::f32({1, 1, 4}, {1, 2, 3, 4});
  EXPECT_EQ(averagePool(
                attrs({intsAttr("kernel_shape", {3}), intsAttr("strides", {2}),
                       intsAttr("pads", {1, 1}), intAttr("ceil_mode", 1),
                       intAttr("count_include_pad", 1)}),
                x, {1, 1, 3}),
            (std::vector<double>{1, 3, 2}));
  EXPECT_EQ(averagePool(
                attrs({intsAttr("kernel_shape", {3}), intsAttr("strides", {2}),
                       intsAttr("pads", {1, 1}), intAttr("ceil_mode", 1)}),
                x, {1, 1, 3}),
            (std::vector<double>{1.5, 3, 4}));
}

// auto_pad SAME: the odd pad goes to the end (UPPER) or start (LOWER);
// padding never counts for auto_pad.
TEST(AveragePoolTest, AutoPadSame) {
  auto x = OwnedTensor::f32({1, 1, 4}, {1, 2, 3, 4});
  EXPECT_EQ(averagePool(attrs({intsAttr("kernel_shape", {2}),
                               stringAttr("auto_pad", "SAME_UPPER")}),
                        x, {1, 1, 4}),
            (std::vector<double>{1.5, 2.5, 3.5, 4}));
  EXPECT_EQ(averagePool(attrs({intsAttr("kernel_shape", {2}),
                               stringAttr("auto_pad", "SAME_LOWER")}),
                        x, {1, 1, 4}),
            (std::vector<double>{1, 1.5, 2.5, 3.5}));
}

// 2-D windows with stride; f16 rounds once on store.
TEST(AveragePoolTest, TwoDStridesAndHalf) {
  auto x = OwnedTensor::f32({1, 1, 4, 4}, iotaValues(16));
  AttributeList a =
      attrs({intsAttr("kernel_shape", {2, 2}), intsAttr("strides", {2, 2})});
  EXPECT_EQ(averagePool(a, x, {1, 1, 2, 2}),
            (std::vector<double>{2.5, 4.5, 10.5, 12.5}));
  auto xh = OwnedTensor::of<Half>(DType::F16, {1, 1, 4, 4}, iotaValues(16));
  OwnedTensor yh(DType::F16, {1, 1, 2, 2});
  EXPECT_EQ(
      errorText(runKernel(runAveragePool, "AveragePool", a, {&xh}, {&yh})), "");
  EXPECT_EQ(yh.values<Half>(), (std::vector<double>{2.5, 4.5, 10.5, 12.5}));
}

// Missing kernel_shape and mismatched output shapes are errors.
TEST(AveragePoolTest, BadAttributesAreErrors) {
  auto x = OwnedTensor::f32({1, 1, 4}, {1, 2, 3, 4});
  OwnedTensor y(DType::F32, {1, 1, 3});
  EXPECT_NE(errorText(runKernel(runAveragePool, "AveragePool", attrs({}), {&x},
                                {&y})),
            "");
  EXPECT_NE(
      errorText(runKernel(runAveragePool, "AveragePool",
                          attrs({intsAttr("kernel_shape", {3})}), {&x}, {&y})),
      "");
  EXPECT_NE(errorText(runKernel(runAveragePool, "AveragePool",
                                attrs({intsAttr("kernel_shape", {2}),
                                       stringAttr("auto_pad", "SAME")}),
                                {&x}, {&y})),
            "");
}

// The mean of each [N, C] plane.
TEST(GlobalAveragePoolTest, PlaneMeans) {
  auto x = OwnedTensor::f32({2, 1, 2, 2}, {1, 2, 3, 4, -1, -1, 5, 5});
  OwnedTensor y(DType::F32, {2, 1, 1, 1});
  EXPECT_EQ(errorText(runKernel(runGlobalAveragePool, "GlobalAveragePool",
                                attrs({}), {&x}, {&y})),
            "");
  EXPECT_EQ(y.f32s(), (std::vector<double>{2.5, 2}));
}

} // namespace
