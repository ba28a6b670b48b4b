//===- NormalizationTest.cpp - Softmax, LogSoftmax, LayerNormalization ----===//
#include "test/unit/kernels/KernelCallHelpers.h"
#include <cmath>
#include <gtest/gtest.h>

using namespace zinc;
using namespace zinc::cpu;
using namespace zinc::cpu::test;

namespace {

using V = std::vector<double>;

V ramp(int64_t n, double scale = 0.3) {
  V v(n);
  for (int64_t i = 0; i < n; ++i)
    v[i] = ((i * 7) % 11 - 5) * scale;
  return v;
}

/// Softmax (or log-softmax) of a [outer, d, inner] view along d, in double.
V naiveSoftmax(const V &x, int64_t outer, int64_t d, int64_t inner, bool log) {
  V y(x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t j) { return (o * d + j) * inner + i; };
      double m = -INFINITY, s = 0;
      for (int64_t j = 0; j < d; ++j)
        m = std::max(m, x[at(j)]);
      for (int64_t j = 0; j < d; ++j)
        s += std::exp(x[at(j)] - m);
      for (int64_t j = 0; j < d; ++j)
        y[at(j)] =
            log ? x[at(j)] - m - std::log(s) : std::exp(x[at(j)] - m) / s;
    }
  return y;
}

void expectNear(const V &got, const V &expect, double tol,
                const std::string &what) {
  ASSERT_EQ(got.size(), expect.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], expect[i], tol) << what << " at " << i;
}

// Opset 13: one axis, any position (the middle axis takes the column path).
// Opset 11: flattened to 2-D at the axis.
TEST(SoftmaxKernels, AxisSemanticsPerOpset) {
  std::vector<int64_t> shape = {2, 3, 4};
  V xv = ramp(24);
  OwnedTensor x = OwnedTensor::f32(shape, xv);
  struct Case {
    int64_t opset, axis, outer, d, inner;
  } cases[] = {{13, 0, 1, 2, 12}, {13, 1, 2, 3, 4},  {13, -1, 6, 4, 1},
               {11, 1, 2, 12, 1}, {11, 0, 1, 24, 1}, {11, -1, 6, 4, 1}};
  for (bool log : {false, true})
    for (const Case &c : cases) {
      OwnedTensor y(DType::F32, shape);
      AttributeList a = attrs({intAttr("axis", c.axis)});
      KernelFn fn = log ? runLogSoftmax : runSoftmax;
      ASSERT_EQ(errorText(runKernel(fn, log ? "LogSoftmax" : "Softmax", a, {&x},
                                    {&y}, c.opset)),
                "");
      expectNear(y.f32s(), naiveSoftmax(xv, c.outer, c.d, c.inner, log), 1e-6,
                 "opset " + std::to_string(c.opset) + " axis " +
                     std::to_string(c.axis));
    }
  // Defaults: axis -1 from opset 13, axis 1 (flattening) before.
  OwnedTensor y(DType::F32, shape);
  ASSERT_EQ(
      errorText(runKernel(runSoftmax, "Softmax", attrs({}), {&x}, {&y}, 13)),
      "");
  expectNear(y.f32s(), naiveSoftmax(xv, 6, 4, 1, false), 1e-6, "default 13");
  ASSERT_EQ(
      errorText(runKernel(runSoftmax, "Softmax", attrs({}), {&x}, {&y}, 11)),
      "");
  expectNear(y.f32s(), naiveSoftmax(xv, 2, 12, 1, false), 1e-6, "default 11");
}

// Large logits neither overflow nor lose the small differences.
TEST(SoftmaxKernels, StableForLargeInputs) {
  OwnedTensor x = OwnedTensor::f32({1, 3}, {10000, 10001, 10002});
  OwnedTensor y(DType::F32, {1, 3});
  ASSERT_EQ(
      errorText(runKernel(runLogSoftmax, "LogSoftmax", attrs({}), {&x}, {&y})),
      "");
  expectNear(y.f32s(), naiveSoftmax({0, 1, 2}, 1, 3, 1, true), 1e-6, "log");
  ASSERT_EQ(errorText(runKernel(runSoftmax, "Softmax", attrs({}), {&x}, {&y})),
            "");
  expectNear(y.f32s(), naiveSoftmax({0, 1, 2}, 1, 3, 1, false), 1e-6,
             "softmax");
}

// Many rows and a long middle axis take the threaded paths; f16 rounds once.
TEST(SoftmaxKernels, LargeAndHalf) {
  std::vector<int64_t> shape = {16, 100, 40};
  V xv = ramp(16 * 100 * 40);
  OwnedTensor x = OwnedTensor::f32(shape, xv);
  for (int64_t axis : {1, 2}) {
    OwnedTensor y(DType::F32, shape);
    AttributeList a = attrs({intAttr("axis", axis)});
    ASSERT_EQ(errorText(runKernel(runSoftmax, "Softmax", a, {&x}, {&y})), "");
    expectNear(y.f32s(),
               axis == 1 ? naiveSoftmax(xv, 16, 100, 40, false)
                         : naiveSoftmax(xv, 1600, 40, 1, false),
               1e-6, "axis " + std::to_string(axis));
  }
  OwnedTensor h = OwnedTensor::of<Half>(DType::F16, {2, 3}, {1, 2, 3, 0, 0, 0});
  OwnedTensor hy(DType::F16, {2, 3});
  ASSERT_EQ(errorText(runKernel(runSoftmax, "Softmax", attrs({}), {&h}, {&hy})),
            "");
  V expect = naiveSoftmax({1, 2, 3, 0, 0, 0}, 2, 3, 1, false);
  for (double &e : expect)
    e = halfToFloat(floatToHalf(static_cast<float>(e)));
  EXPECT_EQ(hy.values<Half>(), expect);
}

/// LayerNormalization of [outer, d] rows, with scale and bias over d.
V naiveLayerNorm(const V &x, int64_t outer, int64_t d, const V &g, const V &b,
                 double eps, V *mean = nullptr, V *inv = nullptr) {
  V y(x.size());
  for (int64_t o = 0; o < outer; ++o) {
    double m = 0, v = 0;
    for (int64_t j = 0; j < d; ++j)
      m += x[o * d + j] / d;
    for (int64_t j = 0; j < d; ++j)
      v += (x[o * d + j] - m) * (x[o * d + j] - m) / d;
    double s = 1 / std::sqrt(v + eps);
    if (mean)
      mean->push_back(m);
    if (inv)
      inv->push_back(s);
    for (int64_t j = 0; j < d; ++j)
      y[o * d + j] = (x[o * d + j] - m) * s * g[j] + (b.empty() ? 0 : b[j]);
  }
  return y;
}

// axis -1 and axis 1 of a rank-3 input, the optional Mean/InvStdDev
// outputs, an absent bias, and the epsilon attribute.
TEST(LayerNormKernel, AxesAndStatistics) {
  std::vector<int64_t> shape = {2, 3, 4};
  V xv = ramp(24);
  OwnedTensor x = OwnedTensor::f32(shape, xv);
  V g4 = {1, 0.5, -2, 1.5}, b4 = {0.1, 0.2, 0.3, 0.4};
  OwnedTensor scale = OwnedTensor::f32({4}, g4),
              bias = OwnedTensor::f32({4}, b4);
  OwnedTensor y(DType::F32, shape), mean(DType::F32, {2, 3, 1}),
      inv(DType::F32, {2, 3, 1});
  AttributeList eps = attrs({floatAttr("epsilon", 0.1)});
  ASSERT_EQ(errorText(runKernel(runLayerNormalization, "LayerNormalization",
                                eps, {&x, &scale, &bias}, {&y, &mean, &inv})),
            "");
  V em, ei;
  expectNear(y.f32s(), naiveLayerNorm(xv, 6, 4, g4, b4, 0.1, &em, &ei), 1e-5,
             "y");
  expectNear(mean.f32s(), em, 1e-6, "mean");
  expectNear(inv.f32s(), ei, 1e-5, "inv");

  V g12 = ramp(12, 0.5);
  OwnedTensor scale12 = OwnedTensor::f32({3, 4}, g12);
  OwnedTensor y1(DType::F32, shape);
  AttributeList axis1 = attrs({intAttr("axis", 1)});
  ASSERT_EQ(
      errorText(runKernel(runLayerNormalization, "LayerNormalization", axis1,
                          {&x, &scale12, nullptr}, {&y1, nullptr, nullptr})),
      "");
  expectNear(y1.f32s(), naiveLayerNorm(xv, 2, 12, g12, {}, 1e-5), 1e-5,
             "axis 1");
}

// A scale that broadcasts within the normalised dimensions ([1,4] over
// [3,4]) works; one that varies along X's leading dimensions is refused.
TEST(LayerNormKernel, ScaleBroadcasting) {
  std::vector<int64_t> shape = {2, 3, 4};
  V xv = ramp(24);
  OwnedTensor x = OwnedTensor::f32(shape, xv);
  V g4 = {1, 2, 3, 4};
  OwnedTensor scale = OwnedTensor::f32({1, 4}, g4);
  OwnedTensor y(DType::F32, shape);
  AttributeList axis1 = attrs({intAttr("axis", -2)});
  ASSERT_EQ(errorText(runKernel(runLayerNormalization, "LayerNormalization",
                                axis1, {&x, &scale}, {&y})),
            "");
  V g12;
  for (int r = 0; r < 3; ++r)
    g12.insert(g12.end(), g4.begin(), g4.end());
  expectNear(y.f32s(), naiveLayerNorm(xv, 2, 12, g12, {}, 1e-5), 1e-5, "bcast");

  OwnedTensor wide = OwnedTensor::f32({2, 1, 4}, ramp(8));
  AttributeList last = attrs({intAttr("axis", -1)});
  EXPECT_EQ(errorText(runKernel(runLayerNormalization, "LayerNormalization",
                                last, {&x, &wide}, {&y})),
            "unsupported: LayerNormalization with Scale of shape [2,1,4] for "
            "normalised shape [4]");
}

// A large mean with a small spread: the variance is taken around the mean,
// so it does not cancel. f16 input is normalised in float.
TEST(LayerNormKernel, PrecisionAndHalf) {
  V xv = {10000.5, 10000.25, 10000.75, 10000.5};
  OwnedTensor x = OwnedTensor::f32({1, 4}, xv);
  OwnedTensor g = OwnedTensor::f32({4}, {1, 1, 1, 1});
  OwnedTensor y(DType::F32, {1, 4});
  ASSERT_EQ(
      errorText(runKernel(runLayerNormalization, "LayerNormalization",
                          attrs({floatAttr("epsilon", 0)}), {&x, &g}, {&y})),
      "");
  expectNear(y.f32s(), {0, -std::sqrt(2.0), std::sqrt(2.0), 0}, 1e-5, "spread");

  OwnedTensor h = OwnedTensor::of<Half>(DType::F16, {2, 2}, {1, 3, -2, 2});
  OwnedTensor hg = OwnedTensor::of<Half>(DType::F16, {2}, {1, 0.5});
  OwnedTensor hy(DType::F16, {2, 2});
  ASSERT_EQ(errorText(runKernel(runLayerNormalization, "LayerNormalization",
                                attrs({}), {&h, &hg}, {&hy})),
            "");
  V expect = naiveLayerNorm({1, 3, -2, 2}, 2, 2, {1, 0.5}, {}, 1e-5);
  for (double &e : expect)
    e = halfToFloat(floatToHalf(static_cast<float>(e)));
  EXPECT_EQ(hy.values<Half>(), expect);

  OwnedTensor i = OwnedTensor::ints({2}, {1, 2});
  OwnedTensor iy(DType::I64, {2});
  EXPECT_EQ(errorText(runKernel(runLayerNormalization, "LayerNormalization",
                                attrs({}), {&i, &i}, {&iy})),
            "unsupported: LayerNormalization from i64 to i64");
}

} // namespace
