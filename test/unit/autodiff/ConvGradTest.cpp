//===- ConvGradTest.cpp - Conv / ConvTranspose gradient rules vs FD -------===//
//
// X, W and B are all parameters, so the input, weight and bias gradients
// are each compared with finite differences. The loss is a weighted sum
// with a frozen random weight c_w, so that every output element's gradient
// differs.
//
//===----------------------------------------------------------------------===//
#include "GradCheck.h"
#include "gtest/gtest.h"

using namespace zinc::test;

static void check(llvm::ArrayRef<ParamSpec> params, llvm::StringRef body,
                  std::vector<int64_t> outShape) {
  std::vector<ParamSpec> all(params.begin(), params.end());
  all.push_back({"c_w", outShape});
  std::string text =
      gradCheckModel(randomInitializers(all),
                     body.str() + "\n  weighted = Mul(y, c_w)\n  loss = "
                                  "ReduceSum<keepdims=0>(weighted)");
  GradCheckOptions opts;
  opts.freeze = "^c_";
  expectGradientsMatch(text, opts);
}

TEST(ConvGrad, ThreeByThreePadOneWithBias) {
  check({{"x", {2, 3, 5, 5}}, {"w", {4, 3, 3, 3}}, {"b", {4}}},
        "  y = Conv<pads=[1,1,1,1]>(x, w, b)", {2, 4, 5, 5});
}

TEST(ConvGrad, StridesDilationsAsymmetricPads) {
  // H: (7 + 1 - 3) / 2 + 1 = 3, W: (6 + 2 - 3) / 1 + 1 = 6.
  check({{"x", {1, 2, 7, 6}}, {"w", {3, 2, 2, 3}}},
        "  y = Conv<strides=[2,1], dilations=[2,1], pads=[1,0,0,2]>(x, w)",
        {1, 3, 3, 6});
}

TEST(ConvGrad, OneDimensionalGroups) {
  check({{"x", {2, 4, 5}}, {"w", {6, 2, 3}}, {"b", {6}}},
        "  y = Conv<group=2, strides=[2], pads=[1,1]>(x, w, b)", {2, 6, 3});
}

TEST(ConvGrad, DepthwiseSameUpperStrided) {
  // One input channel per group (the forward's direct depthwise path),
  // two outputs per channel.
  check({{"x", {1, 3, 4, 4}}, {"w", {6, 1, 3, 3}}, {"b", {6}}},
        "  y = Conv<group=3, strides=[2,2], auto_pad=\"SAME_UPPER\">(x, w, b)",
        {1, 6, 2, 2});
}

TEST(ConvGrad, SameLowerEvenKernel) {
  // An even kernel puts the odd pad pixel at the start.
  check({{"x", {1, 1, 5, 5}}, {"w", {2, 1, 4, 4}}},
        "  y = Conv<auto_pad=\"SAME_LOWER\">(x, w)", {1, 2, 5, 5});
}

TEST(ConvGrad, PointwiseBatched) {
  // 1x1 kernels take the GEMM-only path (no im2col).
  check({{"x", {2, 3, 4, 4}}, {"w", {5, 3, 1, 1}}, {"b", {5}}},
        "  y = Conv(x, w, b)", {2, 5, 4, 4});
}

TEST(ConvGrad, ThreeDimensional) {
  check({{"x", {1, 2, 3, 4, 3}}, {"w", {2, 2, 2, 2, 2}}, {"b", {2}}},
        "  y = Conv<pads=[1,1,1,1,1,1]>(x, w, b)", {1, 2, 4, 5, 4});
}

TEST(ConvGrad, OnlyTheWeightIsTrained) {
  // A frozen input: the rule must not need dX to give dW.
  check({{"c_x", {2, 2, 4, 4}}, {"w", {3, 2, 3, 3}}},
        "  y = Conv<strides=[2,2], pads=[1,1,1,1]>(c_x, w)", {2, 3, 2, 2});
}

TEST(ConvTransposeGrad, StridedPaddedWithOutputPadding) {
  // 2 * (3 - 1) + 1 + 3 - 2 = 6.
  check({{"x", {1, 2, 3, 3}}, {"w", {2, 3, 3, 3}}, {"b", {3}}},
        "  y = ConvTranspose<strides=[2,2], pads=[1,1,1,1], "
        "output_padding=[1,1]>(x, w, b)",
        {1, 3, 6, 6});
}

TEST(ConvTransposeGrad, OneDimensionalGroupsOfOne) {
  // One output channel per group: dX runs Conv's depthwise path.
  check({{"x", {2, 4, 3}}, {"w", {4, 1, 3}}, {"b", {2}}},
        "  y = ConvTranspose<group=2, dilations=[2]>(x, w, b)", {2, 2, 7});
}

TEST(ConvTransposeGrad, OutputShape) {
  // output_shape picks the pads: full size 2 * 2 + 3 = 7, cut to 6.
  check({{"x", {1, 1, 3, 3}}, {"w", {1, 2, 3, 3}}},
        "  y = ConvTranspose<strides=[2,2], output_shape=[6,6]>(x, w)",
        {1, 2, 6, 6});
}
