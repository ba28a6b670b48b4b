//===- BatchNormTest.cpp - BatchNormalization cpu kernel, both modes ------===//
#include "KernelCallHelpers.h"
#include "gtest/gtest.h"
#include <cmath>

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

// Outputs beyond Y without training_mode=1 are refused (the opset < 14
// forms); absent optional outputs are not a request.
TEST(BatchNormTest, RunningOutputsNeedTrainingMode) {
  auto x = OwnedTensor::f32({1, 1, 2}, {1, 2});
  auto p = OwnedTensor::f32({1}, {1});
  OwnedTensor y(DType::F32, {1, 1, 2}), runMean(DType::F32, {1}),
      runVar(DType::F32, {1});
  EXPECT_EQ(errorText(runKernel(runBatchNormalization, "BatchNormalization",
                                attrs({}), {&x, &p, &p, &p, &p},
                                {&y, &runMean, &runVar}, 14)),
            "BatchNormalization: outputs beyond Y need training_mode=1");
  EXPECT_EQ(errorText(runKernel(runBatchNormalization, "BatchNormalization",
                                attrs({}), {&x, &p, &p, &p, &p},
                                {&y, nullptr, nullptr}, 14)),
            "");
}

/// Training mode computed directly in double: per channel of [N, C, S],
/// the batch mean and population variance, Y, and the running statistics
/// updated with the unbiased variance.
struct TrainingReference {
  std::vector<double> y, runningMean, runningVar, mean, invStd;
};
static TrainingReference trainingReference(const std::vector<double> &x,
                                           int64_t n, int64_t c, int64_t s,
                                           const std::vector<double> &scale,
                                           const std::vector<double> &bias,
                                           const std::vector<double> &rm,
                                           const std::vector<double> &rv,
                                           double eps, double momentum) {
  TrainingReference r;
  r.y.resize(x.size());
  double count = static_cast<double>(n * s);
  for (int64_t ch = 0; ch < c; ++ch) {
    double sum = 0, sq = 0;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < s; ++i)
        sum += x[(b * c + ch) * s + i];
    double mean = sum / count;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < s; ++i)
        sq +=
            (x[(b * c + ch) * s + i] - mean) * (x[(b * c + ch) * s + i] - mean);
    double var = sq / count, inv = 1 / std::sqrt(var + eps);
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < s; ++i) {
        int64_t k = (b * c + ch) * s + i;
        r.y[k] = (x[k] - mean) * inv * scale[ch] + bias[ch];
      }
    r.mean.push_back(mean);
    r.invStd.push_back(inv);
    r.runningMean.push_back(momentum * rm[ch] + (1 - momentum) * mean);
    r.runningVar.push_back(momentum * rv[ch] +
                           (1 - momentum) * sq / (count - 1));
  }
  return r;
}

static void expectNear(const std::vector<double> &got,
                       const std::vector<double> &want, double tol,
                       const char *what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tol * std::max(1.0, std::abs(want[i])))
        << what << "[" << i << "]";
}

// Batch statistics over N and the spatial axes; running statistics with
// ONNX's momentum (the weight of the old value) and PyTorch's unbiased
// variance; zinc's outputs 3 and 4 are the batch mean and inverse std.
TEST(BatchNormTest, TrainingModeMatchesReference) {
  const int64_t n = 3, c = 2, s = 5;
  std::vector<double> xv = randomValues(n * c * s, -2, 3, 7);
  auto x = OwnedTensor::f32({n, c, s}, xv);
  xv = x.f32s(); // the reference sees the float-rounded input
  auto scale = OwnedTensor::f32({c}, {1.5, -0.5});
  auto bias = OwnedTensor::f32({c}, {0.25, 2});
  auto rm = OwnedTensor::f32({c}, {0.5, -1});
  auto rv = OwnedTensor::f32({c}, {2, 0.75});
  OwnedTensor y(DType::F32, {n, c, s}), outMean(DType::F32, {c}),
      outVar(DType::F32, {c}), mean(DType::F32, {c}), invStd(DType::F32, {c});
  EXPECT_EQ(errorText(runKernel(
                runBatchNormalization, "BatchNormalization",
                attrs({intAttr("training_mode", 1), floatAttr("epsilon", 1e-3),
                       floatAttr("momentum", 0.8)}),
                {&x, &scale, &bias, &rm, &rv},
                {&y, &outMean, &outVar, &mean, &invStd}, 15)),
            "");
  TrainingReference want = trainingReference(
      xv, n, c, s, scale.f32s(), bias.f32s(), rm.f32s(), rv.f32s(), 1e-3, 0.8);
  expectNear(y.f32s(), want.y, 2e-6, "Y");
  expectNear(outMean.f32s(), want.runningMean, 1e-6, "running_mean");
  expectNear(outVar.f32s(), want.runningVar, 1e-6, "running_var");
  expectNear(mean.f32s(), want.mean, 1e-6, "batch mean");
  expectNear(invStd.f32s(), want.invStd, 1e-6, "batch invstd");
  // The inputs are left alone: the step stores the outputs into them.
  EXPECT_EQ(rm.f32s(), (std::vector<double>{0.5, -1}));
}

// A hand-checked case: values {1, 3} and {2, 6} in one channel each (N=2,
// no spatial axes): means 2 and 4, population variances 1 and 4, unbiased
// 2 and 8; with momentum 0.5 the running variance moves half way to them.
TEST(BatchNormTest, TrainingModeRunningVarianceIsUnbiased) {
  auto x = OwnedTensor::f32({2, 2}, {1, 2, 3, 6});
  auto one = OwnedTensor::f32({2}, {1, 1});
  auto zero = OwnedTensor::f32({2}, {0, 0});
  OwnedTensor y(DType::F32, {2, 2}), outMean(DType::F32, {2}),
      outVar(DType::F32, {2});
  EXPECT_EQ(errorText(runKernel(
                runBatchNormalization, "BatchNormalization",
                attrs({intAttr("training_mode", 1), floatAttr("epsilon", 0),
                       floatAttr("momentum", 0.5)}),
                {&x, &one, &zero, &zero, &one}, {&y, &outMean, &outVar}, 15)),
            "");
  EXPECT_EQ(y.f32s(), (std::vector<double>{-1, -1, 1, 1}));
  EXPECT_EQ(outMean.f32s(), (std::vector<double>{1, 2}));
  EXPECT_EQ(outVar.f32s(), (std::vector<double>{1.5, 4.5}));
}

// One value per channel has no batch variance (PyTorch refuses it too).
TEST(BatchNormTest, TrainingModeNeedsTwoValuesPerChannel) {
  auto x = OwnedTensor::f32({1, 2}, {1, 2});
  auto p = OwnedTensor::f32({2}, {1, 1});
  OwnedTensor y(DType::F32, {1, 2});
  EXPECT_EQ(errorText(runKernel(runBatchNormalization, "BatchNormalization",
                                attrs({intAttr("training_mode", 1)}),
                                {&x, &p, &p, &p, &p}, {&y}, 15)),
            "BatchNormalization: training mode needs more than one value per "
            "channel, got input shape [1,2]");
}

// The gradient kernel gives the same result from the forward's saved
// statistics as from statistics it recomputes, and its dscale and dbias
// are sum(dy * xhat) and sum(dy).
TEST(BatchNormTest, GradientWithAndWithoutSavedStatistics) {
  const int64_t n = 2, c = 3, s = 4;
  auto x = OwnedTensor::f32({n, c, s}, randomValues(n * c * s, -1, 2, 3));
  auto dy = OwnedTensor::f32({n, c, s}, randomValues(n * c * s, -1, 1, 4));
  auto scale = OwnedTensor::f32({c}, {0.5, 1, -2});
  auto zero = OwnedTensor::f32({c}, {0, 0, 0});
  auto one = OwnedTensor::f32({c}, {1, 1, 1});
  OwnedTensor y(DType::F32, {n, c, s}), mean(DType::F32, {c}),
      invStd(DType::F32, {c});
  AttributeList forward = attrs({intAttr("training_mode", 1)});
  ASSERT_EQ(errorText(runKernel(runBatchNormalization, "BatchNormalization",
                                forward, {&x, &scale, &zero, &zero, &one},
                                {&y, nullptr, nullptr, &mean, &invStd}, 15)),
            "");
  OwnedTensor dx1(DType::F32, {n, c, s}), ds1(DType::F32, {c}),
      db1(DType::F32, {c}), dx2(DType::F32, {n, c, s}), ds2(DType::F32, {c}),
      db2(DType::F32, {c});
  AttributeList grad = attrs({floatAttr("epsilon", 1e-5)});
  ASSERT_EQ(errorText(runKernel(
                runBatchNormalizationGrad, "BatchNormalizationGrad", grad,
                {&dy, &x, &scale, &mean, &invStd}, {&dx1, &ds1, &db1})),
            "");
  ASSERT_EQ(
      errorText(runKernel(runBatchNormalizationGrad, "BatchNormalizationGrad",
                          grad, {&dy, &x, &scale}, {&dx2, &ds2, &db2})),
      "");
  expectNear(dx1.f32s(), dx2.f32s(), 1e-5, "dx");
  expectNear(ds1.f32s(), ds2.f32s(), 1e-5, "dscale");
  EXPECT_EQ(db1.f32s(), db2.f32s());
  std::vector<double> xs = x.f32s(), dys = dy.f32s(), m = mean.f32s(),
                      inv = invStd.f32s();
  for (int64_t ch = 0; ch < c; ++ch) {
    double sumDy = 0, sumDyXhat = 0, sumDx = 0;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < s; ++i) {
        int64_t k = (b * c + ch) * s + i;
        sumDy += dys[k];
        sumDyXhat += dys[k] * (xs[k] - m[ch]) * inv[ch];
        sumDx += dx1.f32s()[k];
      }
    EXPECT_NEAR(db1.f32s()[ch], sumDy, 1e-5);
    EXPECT_NEAR(ds1.f32s()[ch], sumDyXhat, 1e-5);
    // Shifting x by a constant per channel changes nothing: dx sums to 0.
    EXPECT_NEAR(sumDx, 0, 1e-5);
  }
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
