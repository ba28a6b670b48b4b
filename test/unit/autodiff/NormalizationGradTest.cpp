//===- NormalizationGradTest.cpp - Softmax, LogSoftmax, LayerNorm vs FD ---===//
#include "GradCheck.h"
#include "RuleChecks.h"
#include "gtest/gtest.h"

using namespace zinc::test;

// Each loss is a weighted sum with a frozen random weight c_w, so every
// output element's gradient differs (a plain sum of a softmax has none).
static void check(llvm::ArrayRef<ParamSpec> params, llvm::StringRef body,
                  std::vector<int64_t> outShape, int opset = 17) {
  std::vector<ParamSpec> all(params.begin(), params.end());
  all.push_back({"c_w", outShape});
  std::string text =
      gradCheckModel(randomInitializers(all, /*seed=*/3),
                     body.str() + "\n  weighted = Mul(y, c_w)\n  loss = "
                                  "ReduceSum<keepdims=0>(weighted)",
                     opset);
  GradCheckOptions opts;
  opts.freeze = "^c_";
  opts.opset = opset;
  expectGradientsMatch(text, opts);
}

//===----------------------------------------------------------------------===//
// Softmax and LogSoftmax, opset 13+ (one axis)
//===----------------------------------------------------------------------===//

TEST(SoftmaxGrad, DefaultLastAxis) {
  check({{"x", {2, 3, 4}, -2, 2}}, "  y = Softmax(x)", {2, 3, 4});
}

TEST(SoftmaxGrad, MiddleAxisIsNotInnermost) {
  check({{"x", {2, 3, 4}, -2, 2}}, "  y = Softmax<axis=1>(x)", {2, 3, 4});
}

TEST(SoftmaxGrad, NegativeAndLeadingAxis) {
  check({{"x", {3, 2, 2}, -2, 2}}, "  y = Softmax<axis=-3>(x)", {3, 2, 2});
}

TEST(SoftmaxGrad, AttentionScoresOverKeys) {
  // [B, heads, T, T] attention probabilities, the GPT shape.
  check({{"x", {2, 2, 3, 3}, -3, 3}}, "  y = Softmax<axis=-1>(x)",
        {2, 2, 3, 3});
}

TEST(LogSoftmaxGrad, DefaultLastAxis) {
  check({{"x", {2, 3, 4}, -2, 2}}, "  y = LogSoftmax(x)", {2, 3, 4});
}

TEST(LogSoftmaxGrad, MiddleAxisIsNotInnermost) {
  check({{"x", {2, 3, 4}, -2, 2}}, "  y = LogSoftmax<axis=1>(x)", {2, 3, 4});
}

TEST(LogSoftmaxGrad, ChainedAfterMatMul) {
  // A classifier head: the gradient reaches the weights through both rules.
  check({{"a", {3, 4}}, {"w", {4, 5}}},
        "  z = MatMul(a, w)\n  y = LogSoftmax<axis=1>(z)", {3, 5});
}

//===----------------------------------------------------------------------===//
// Softmax and LogSoftmax before opset 13 (flattened to 2-D at axis)
//===----------------------------------------------------------------------===//

TEST(SoftmaxGrad, Opset11DefaultAxisFlattensTheTail) {
  // axis defaults to 1: each row of 12 = 3*4 values is one distribution.
  check({{"x", {2, 3, 4}, -2, 2}}, "  y = Softmax(x)", {2, 3, 4}, 11);
}

TEST(SoftmaxGrad, Opset11AxisTwo) {
  check({{"x", {2, 3, 4}, -2, 2}}, "  y = Softmax<axis=2>(x)", {2, 3, 4}, 11);
}

TEST(SoftmaxGrad, Opset11AxisZeroIsOneDistribution) {
  check({{"x", {2, 3, 2}, -2, 2}}, "  y = Softmax<axis=0>(x)", {2, 3, 2}, 11);
}

TEST(LogSoftmaxGrad, Opset11DefaultAxisFlattensTheTail) {
  check({{"x", {2, 3, 4}, -2, 2}}, "  y = LogSoftmax(x)", {2, 3, 4}, 11);
}

TEST(LogSoftmaxGrad, Opset11NegativeAxis) {
  check({{"x", {2, 3, 4}, -2, 2}}, "  y = LogSoftmax<axis=-2>(x)", {2, 3, 4},
        11);
}

//===----------------------------------------------------------------------===//
// LayerNormalization
//===----------------------------------------------------------------------===//

TEST(LayerNormalizationGrad, LastAxisWithScaleAndBias) {
  // The GPT block's LayerNorm: [B, T, D] over D.
  check({{"x", {2, 3, 8}, -2, 2}, {"s", {8}, 0.5, 1.5}, {"b", {8}}},
        "  y = LayerNormalization<axis=-1, epsilon=1e-5>(x, s, b)", {2, 3, 8});
}

TEST(LayerNormalizationGrad, TwoNormalisedAxesLargeEpsilon) {
  check({{"x", {2, 3, 4}, -2, 2}, {"s", {3, 4}, 0.5, 1.5}, {"b", {3, 4}}},
        "  y = LayerNormalization<axis=1, epsilon=0.25>(x, s, b)", {2, 3, 4});
}

TEST(LayerNormalizationGrad, NoBias) {
  check({{"x", {4, 5}, -2, 2}, {"s", {5}, 0.5, 1.5}},
        "  y = LayerNormalization<axis=1>(x, s)", {4, 5});
}

TEST(LayerNormalizationGrad, ScaleBroadcastOverANormalisedAxis) {
  // Scale [1, 4] against normalised [3, 4]: its gradient also sums over T.
  check({{"x", {2, 3, 4}, -2, 2}, {"s", {1, 4}, 0.5, 1.5}, {"b", {4}}},
        "  y = LayerNormalization<axis=1>(x, s, b)", {2, 3, 4});
}

TEST(LayerNormalizationGrad, StatisticsOutputsRequested) {
  // Mean / InvStdDev exist (float stash for a double x, so the kernel
  // recomputes them) and carry no gradient.
  check({{"x", {2, 3, 4}, -2, 2}, {"s", {4}, 0.5, 1.5}, {"b", {4}}},
        "  y, m, r = LayerNormalization<axis=-1>(x, s, b)", {2, 3, 4});
}

TEST(LayerNormalizationGrad, OnlyScaleAndBiasTrainable) {
  // x is a frozen constant: only the affine parameters get gradients.
  check({{"c_x", {3, 6}, -2, 2}, {"s", {6}, 0.5, 1.5}, {"b", {6}}},
        "  y = LayerNormalization<axis=-1>(c_x, s, b)", {3, 6});
}

TEST(LayerNormalizationGrad, InsideResidualBlock) {
  // x feeds both the norm and the residual: gradients accumulate.
  check({{"x", {2, 3, 4}, -2, 2},
         {"s", {4}, 0.5, 1.5},
         {"b", {4}},
         {"w", {4, 4}}},
        "  h = LayerNormalization<axis=-1>(x, s, b)\n"
        "  p = MatMul(h, w)\n"
        "  y = Add(x, p)",
        {2, 3, 4});
}

TEST(NormalizationGrad, RmsNormFusedFromTheExportedFormula) {
  // fuse-rms-norm makes the chain one zinc.RmsNorm
  // (test/lit/passes/fuse-rms-norm.onnxtxt shows it); its gradient is
  // zinc.RmsNormGrad, and the weight's comes through the Mul after it.
  checkWeighted({{{"a", {3, 5}}, {"w", {5}}},
                 "  two = Constant<value = double {2.0}>()\n"
                 "  sq = Pow(a, two)\n"
                 "  ms = ReduceMean<axes = [-1], keepdims = 1>(sq)\n"
                 "  eps = Constant<value = double {1e-5}>()\n"
                 "  v = Add(ms, eps)\n"
                 "  s = Sqrt(v)\n"
                 "  r = Reciprocal(s)\n"
                 "  n = Mul(a, r)\n"
                 "  y = Mul(w, n)",
                 {3, 5},
                 17,
                 "",
                 1e-6,
                 1e-6,
                 "fuse-rms-norm,build-training"});
}
