//===- LossTest.cpp - SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss
//===//
#include "test/unit/kernels/KernelCallHelpers.h"
#include <cmath>
#include <gtest/gtest.h>
#include <random>

using namespace zinc;
using namespace zinc::cpu;
using namespace zinc::cpu::test;

namespace {

using V = std::vector<double>;

struct Reference {
  V loss;    // per position, or one value when reduced
  V logProb; // [N, C, D]
};

/// The spec's definition written out directly, in double.
Reference referenceLoss(const V &x, const std::vector<int64_t> &target,
                        const V *weight, int64_t n, int64_t c, int64_t d,
                        const std::string &reduction, bool softmax,
                        const int64_t *ignore) {
  Reference r;
  r.logProb = x;
  if (softmax)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t k = 0; k < d; ++k) {
        double m = -INFINITY, s = 0;
        for (int64_t j = 0; j < c; ++j)
          m = std::max(m, x[(i * c + j) * d + k]);
        for (int64_t j = 0; j < c; ++j)
          s += std::exp(x[(i * c + j) * d + k] - m);
        for (int64_t j = 0; j < c; ++j)
          r.logProb[(i * c + j) * d + k] =
              x[(i * c + j) * d + k] - m - std::log(s);
      }
  double sum = 0, wsum = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < d; ++k) {
      int64_t t = target[i * d + k];
      double w = (ignore && t == *ignore) ? 0 : weight ? (*weight)[t] : 1;
      double l = w == 0 ? 0 : -r.logProb[(i * c + t) * d + k] * w;
      r.loss.push_back(l);
      sum += l;
      wsum += w;
    }
  if (reduction == "sum")
    r.loss = {sum};
  else if (reduction == "mean")
    r.loss = {sum / wsum};
  return r;
}

void expectNear(const V &got, const V &want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tol * (1 + std::fabs(want[i]))) << "at " << i;
}

// Every reduction, with and without weights and ignore_index, on a
// [N, C, d1, d2] input, for both ops; SCE also writes log_prob.
TEST(LossKernels, MatchesDefinition) {
  const int64_t n = 3, c = 4, d1 = 2, d2 = 3, d = d1 * d2;
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> dist(-3, 3);
  V x(n * c * d);
  for (double &v : x)
    v = static_cast<float>(dist(rng));
  std::vector<int64_t> target(n * d);
  for (size_t i = 0; i < target.size(); ++i)
    target[i] = static_cast<int64_t>(i * 7 % c);
  V weight = {0.5, 2.0, 1.25, 0.75};

  OwnedTensor xt = OwnedTensor::f32({n, c, d1, d2}, x);
  OwnedTensor tt = OwnedTensor::ints({n, d1, d2}, target);
  OwnedTensor wt = OwnedTensor::f32({c}, weight);
  for (bool softmax : {true, false})
    for (const char *reduction : {"none", "sum", "mean"})
      for (bool weighted : {false, true})
        for (bool ignoring : {false, true}) {
          int64_t ignore = 1;
          AttributeList a = attrs({stringAttr("reduction", reduction)});
          if (ignoring)
            a.set(intAttr("ignore_index", ignore));
          bool none = std::string(reduction) == "none";
          OwnedTensor loss = none ? OwnedTensor(DType::F32, {n, d1, d2})
                                  : OwnedTensor(DType::F32, {});
          OwnedTensor logProb(DType::F32, {n, c, d1, d2});
          llvm::Error e =
              softmax
                  ? runKernel(runSoftmaxCrossEntropyLoss,
                              "SoftmaxCrossEntropyLoss", a,
                              {&xt, &tt, weighted ? &wt : nullptr},
                              {&loss, &logProb})
                  : runKernel(runNegativeLogLikelihoodLoss,
                              "NegativeLogLikelihoodLoss", a,
                              {&xt, &tt, weighted ? &wt : nullptr}, {&loss});
          ASSERT_EQ(errorText(std::move(e)), "");
          Reference ref =
              referenceLoss(x, target, weighted ? &weight : nullptr, n, c, d,
                            reduction, softmax, ignoring ? &ignore : nullptr);
          SCOPED_TRACE(std::string(softmax ? "sce " : "nll ") + reduction +
                       (weighted ? " weighted" : "") +
                       (ignoring ? " ignore" : ""));
          expectNear(loss.f32s(), ref.loss, 1e-5);
          if (softmax)
            expectNear(logProb.f32s(), ref.logProb, 1e-5);
        }
}

// [N, C] rows large enough to be split across threads, with log_prob.
TEST(LossKernels, LargeRowsMatchDefinition) {
  const int64_t n = 64, c = 5000;
  V x(n * c);
  for (int64_t i = 0; i < n * c; ++i)
    x[i] = static_cast<float>((i * 37 % 101) * 0.05 - 2.5);
  std::vector<int64_t> target(n);
  for (int64_t i = 0; i < n; ++i)
    target[i] = i * 97 % c;
  OwnedTensor xt = OwnedTensor::f32({n, c}, x);
  OwnedTensor tt = OwnedTensor::ints({n}, target);
  OwnedTensor loss(DType::F32, {}), logProb(DType::F32, {n, c});
  ASSERT_EQ(
      errorText(runKernel(runSoftmaxCrossEntropyLoss, "SoftmaxCrossEntropyLoss",
                          {}, {&xt, &tt}, {&loss, &logProb})),
      "");
  Reference ref =
      referenceLoss(x, target, nullptr, n, c, 1, "mean", true, nullptr);
  expectNear(loss.f32s(), ref.loss, 1e-5);
  expectNear(logProb.f32s(), ref.logProb, 1e-5);
}

// Mean with weights divides by the weights of the non-ignored targets only:
// (2*1 + 3*4) / (2 + 3), the ignored third sample (class 0) contributing to
// neither sum.
TEST(LossKernels, WeightedMeanDividesByKeptWeights) {
  OwnedTensor input = OwnedTensor::f32({3, 2}, {-1, -2, -3, -4, -5, -6});
  OwnedTensor target = OwnedTensor::ints({3}, {0, 1, 2});
  OwnedTensor weight = OwnedTensor::f32({2}, {2, 3});
  OwnedTensor loss(DType::F32, {});
  ASSERT_EQ(errorText(runKernel(runNegativeLogLikelihoodLoss,
                                "NegativeLogLikelihoodLoss",
                                attrs({intAttr("ignore_index", 2)}),
                                {&input, &target, &weight}, {&loss})),
            "");
  EXPECT_FLOAT_EQ(loss.f32s()[0], 14.0 / 5.0);
}

TEST(LossKernels, AllIgnoredMeanIsNaN) {
  OwnedTensor input = OwnedTensor::f32({2, 2}, {0, 1, 2, 3});
  OwnedTensor target = OwnedTensor::ints({2}, {-1, -1});
  OwnedTensor loss(DType::F32, {});
  ASSERT_EQ(
      errorText(runKernel(runSoftmaxCrossEntropyLoss, "SoftmaxCrossEntropyLoss",
                          attrs({intAttr("ignore_index", -1)}),
                          {&input, &target}, {&loss})),
      "");
  EXPECT_TRUE(std::isnan(loss.f32s()[0]));
}

TEST(LossKernels, TargetOutOfRangeIsAnError) {
  OwnedTensor input = OwnedTensor::f32({2, 3}, V(6, 0));
  OwnedTensor target = OwnedTensor::ints({2}, {0, 3});
  OwnedTensor loss(DType::F32, {});
  EXPECT_EQ(errorText(runKernel(runNegativeLogLikelihoodLoss,
                                "NegativeLogLikelihoodLoss", {},
                                {&input, &target}, {&loss})),
            "NegativeLogLikelihoodLoss: target 3 at position 1 is out of range "
            "for 3 classes");
  // An ignore_index outside [0, C) is fine where it is the target.
  ASSERT_EQ(errorText(runKernel(runNegativeLogLikelihoodLoss,
                                "NegativeLogLikelihoodLoss",
                                attrs({intAttr("ignore_index", 3)}),
                                {&input, &target}, {&loss})),
            "");
  EXPECT_FLOAT_EQ(loss.f32s()[0], 0.0f);
}

// f16 scores with int32 targets: computed in float, rounded once.
TEST(LossKernels, HalfScoresInt32Targets) {
  V x = {0.5, -1.25, 2.0, 0.0, 1.5, -0.75};
  OwnedTensor input = OwnedTensor::of<Half>(DType::F16, {2, 3}, x);
  OwnedTensor target = OwnedTensor::of<int32_t>(DType::I32, {2}, {2, 0});
  OwnedTensor loss(DType::F16, {2}), logProb(DType::F16, {2, 3});
  ASSERT_EQ(
      errorText(runKernel(runSoftmaxCrossEntropyLoss, "SoftmaxCrossEntropyLoss",
                          attrs({stringAttr("reduction", "none")}),
                          {&input, &target}, {&loss, &logProb})),
      "");
  Reference ref =
      referenceLoss(x, {2, 0}, nullptr, 2, 3, 1, "none", true, nullptr);
  expectNear(loss.values<Half>(), ref.loss, 1e-3);
  expectNear(logProb.values<Half>(), ref.logProb, 1e-3);
}

TEST(LossKernels, RejectsBadOperands) {
  OwnedTensor ints = OwnedTensor::of<int32_t>(DType::I32, {2, 2}, {0, 1, 2, 3});
  OwnedTensor target = OwnedTensor::ints({2}, {0, 1});
  OwnedTensor intLoss(DType::I32, {});
  EXPECT_EQ(
      errorText(runKernel(runSoftmaxCrossEntropyLoss, "SoftmaxCrossEntropyLoss",
                          {}, {&ints, &target}, {&intLoss})),
      "unsupported: SoftmaxCrossEntropyLoss on i32 input");
  OwnedTensor input = OwnedTensor::f32({2, 2}, {0, 1, 2, 3});
  OwnedTensor loss(DType::F32, {});
  EXPECT_NE(
      errorText(runKernel(runSoftmaxCrossEntropyLoss, "SoftmaxCrossEntropyLoss",
                          attrs({stringAttr("reduction", "max")}),
                          {&input, &target}, {&loss})),
      "");
  OwnedTensor shortWeight = OwnedTensor::f32({1}, {1});
  EXPECT_NE(
      errorText(runKernel(runSoftmaxCrossEntropyLoss, "SoftmaxCrossEntropyLoss",
                          {}, {&input, &target, &shortWeight}, {&loss})),
      "");
  OwnedTensor wrongTarget = OwnedTensor::ints({3}, {0, 1, 0});
  EXPECT_NE(
      errorText(runKernel(runSoftmaxCrossEntropyLoss, "SoftmaxCrossEntropyLoss",
                          {}, {&input, &wrongTarget}, {&loss})),
      "");
}

} // namespace
