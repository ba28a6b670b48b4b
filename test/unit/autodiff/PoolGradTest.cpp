//===- PoolGradTest.cpp - Pooling and BatchNormalization rules vs FD ------===//
//
// Random inputs have no ties, so MaxPool is differentiable at them and its
// gradient can be checked by finite differences; the tie rule (first
// maximum) is checked on the kernel in test/unit/kernels/ConvPoolGradTest.cpp.
//
//===----------------------------------------------------------------------===//
#include "GradCheck.h"
#include "gtest/gtest.h"

using namespace zinc::test;

static void check(llvm::ArrayRef<ParamSpec> params, llvm::StringRef body,
                  std::vector<int64_t> outShape, int opset = 17) {
  std::vector<ParamSpec> all(params.begin(), params.end());
  all.push_back({"c_w", outShape});
  std::string text =
      gradCheckModel(randomInitializers(all),
                     body.str() + "\n  weighted = Mul(y, c_w)\n  loss = "
                                  "ReduceSum<keepdims=0>(weighted)",
                     opset);
  GradCheckOptions opts;
  opts.freeze = "^c_";
  expectGradientsMatch(text, opts);
}

TEST(MaxPoolGrad, TwoByTwoStrideTwo) {
  check({{"x", {2, 3, 4, 4}}},
        "  y = MaxPool<kernel_shape=[2,2], strides=[2,2]>(x)", {2, 3, 2, 2});
}

TEST(MaxPoolGrad, OverlappingPaddedWindows) {
  // One input can be the maximum of several windows: gradients add up.
  check({{"x", {1, 2, 5, 5}}},
        "  y = MaxPool<kernel_shape=[3,3], pads=[1,1,1,1]>(x)", {1, 2, 5, 5});
}

TEST(MaxPoolGrad, CeilModeDilations) {
  // H: ceil((6 - 3) / 2) + 1 = 3, W: ceil((7 - 2) / 2) + 1 = 4.
  check({{"x", {1, 1, 6, 7}}},
        "  y = MaxPool<kernel_shape=[2,2], strides=[2,2], dilations=[2,1], "
        "ceil_mode=1>(x)",
        {1, 1, 3, 4});
}

TEST(MaxPoolGrad, OneDimensionalSameUpper) {
  check({{"x", {2, 2, 9}}},
        "  y = MaxPool<kernel_shape=[3], strides=[2], "
        "auto_pad=\"SAME_UPPER\">(x)",
        {2, 2, 5});
}

TEST(MaxPoolGrad, IndicesOutputCarriesNoGradient) {
  check({{"x", {1, 2, 4, 4}}},
        "  y, idx = MaxPool<kernel_shape=[2,2], strides=[2,2]>(x)",
        {1, 2, 2, 2});
}

TEST(AveragePoolGrad, PadsExcludedFromCount) {
  check({{"x", {1, 2, 5, 5}}},
        "  y = AveragePool<kernel_shape=[3,3], strides=[2,2], "
        "pads=[1,1,1,1]>(x)",
        {1, 2, 3, 3});
}

TEST(AveragePoolGrad, PadsIncludedInCount) {
  check({{"x", {1, 2, 5, 5}}},
        "  y = AveragePool<kernel_shape=[3,3], strides=[2,2], "
        "pads=[1,1,1,1], count_include_pad=1>(x)",
        {1, 2, 3, 3});
}

TEST(AveragePoolGrad, CeilModeCountIncludePad) {
  // The last window runs past the end pad; those taps are not counted.
  check({{"x", {1, 1, 6, 6}}},
        "  y = AveragePool<kernel_shape=[3,3], strides=[2,2], "
        "pads=[1,1,1,1], ceil_mode=1, count_include_pad=1>(x)",
        {1, 1, 4, 4});
}

TEST(AveragePoolGrad, OneDimensional) {
  check({{"x", {2, 3, 7}}},
        "  y = AveragePool<kernel_shape=[2], strides=[1]>(x)", {2, 3, 6});
}

TEST(GlobalAveragePoolGrad, FourD) {
  check({{"x", {2, 3, 4, 5}}}, "  y = GlobalAveragePool(x)", {2, 3, 1, 1});
}

TEST(GlobalAveragePoolGrad, OneD) {
  check({{"x", {2, 3, 6}}}, "  y = GlobalAveragePool(x)", {2, 3, 1});
}

TEST(BatchNormGrad, EveryInputWithRunningStatistics) {
  // mean and var get their true gradients (a model freezes them).
  check({{"x", {2, 3, 4, 4}},
         {"scale", {3}},
         {"bias", {3}},
         {"mean", {3}},
         {"var", {3}, 0.5, 2.0}},
        "  y = BatchNormalization<epsilon=0.001>(x, scale, bias, mean, var)",
        {2, 3, 4, 4});
}

TEST(BatchNormGrad, TwoDimensionalInputFrozenStatistics) {
  check({{"x", {4, 3}},
         {"scale", {3}},
         {"bias", {3}},
         {"c_mean", {3}},
         {"c_var", {3}, 0.5, 2.0}},
        "  y = BatchNormalization(x, scale, bias, c_mean, c_var)", {4, 3});
}

// Training mode: normalised with the batch statistics, whose dependence on
// x is part of the gradient; the running statistics are model state (no
// gradient, and their in-place update does not change the loss).
TEST(BatchNormGrad, TrainingModeBatchStatistics) {
  check({{"x", {3, 2, 3, 2}},
         {"scale", {2}},
         {"bias", {2}},
         {"mean", {2}},
         {"var", {2}, 0.5, 2.0}},
        "  y, rm, rv = BatchNormalization<epsilon=0.001, momentum=0.9, "
        "training_mode=1>(x, scale, bias, mean, var)",
        {3, 2, 3, 2});
}

TEST(BatchNormGrad, TrainingModeTwoDimensional) {
  check({{"x", {5, 3}},
         {"scale", {3}},
         {"bias", {3}},
         {"mean", {3}},
         {"var", {3}, 0.5, 2.0}},
        "  y, rm, rv = BatchNormalization<training_mode=1>(x, scale, bias, "
        "mean, var)",
        {5, 3}, /*opset=*/14);
}

TEST(BatchNormGrad, PerActivationBeforeOpset9) {
  // spatial=0: one set of statistics per activation, [C, H].
  check({{"x", {2, 2, 3}},
         {"scale", {2, 3}},
         {"bias", {2, 3}},
         {"mean", {2, 3}},
         {"var", {2, 3}, 0.5, 2.0}},
        "  y = BatchNormalization<spatial=0>(x, scale, bias, mean, var)",
        {2, 2, 3}, /*opset=*/7);
}

// The shapes PyTorch exports for a small CNN: Conv(3x3, pad 1) + Relu +
// MaxPool(2) + Conv + GlobalAveragePool + Flatten + Linear (MatMul + Add).
TEST(CnnGrad, PyTorchExportShapes) {
  check(
      {{"x", {2, 3, 8, 8}},
       {"w1", {4, 3, 3, 3}},
       {"b1", {4}},
       {"w2", {6, 4, 3, 3}},
       {"b2", {6}},
       {"w3", {6, 5}},
       {"b3", {5}}},
      "  c1 = Conv<kernel_shape=[3,3], pads=[1,1,1,1], strides=[1,1]>(x, w1, "
      "b1)\n"
      "  r1 = Relu(c1)\n"
      "  p1 = MaxPool<kernel_shape=[2,2], strides=[2,2], pads=[0,0,0,0]>(r1)\n"
      "  c2 = Conv<kernel_shape=[3,3], pads=[1,1,1,1], strides=[1,1]>(p1, w2, "
      "b2)\n"
      "  g = GlobalAveragePool(c2)\n"
      "  f = Flatten<axis=1>(g)\n"
      "  m = MatMul(f, w3)\n"
      "  y = Add(m, b3)",
      {2, 5});
}
