//===- ConvTest.cpp - Conv and ConvTranspose cpu kernels on small cases ---===//
#include "KernelCallHelpers.h"
#include "gtest/gtest.h"
#include <random>

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

/// Runs Conv on f32 operands; Y has shape `yShape`.
std::vector<double> conv(const AttributeList &a, const OwnedTensor &x,
                         const OwnedTensor &w, const OwnedTensor *b,
                         llvm::ArrayRef<int64_t> yShape) {
  OwnedTensor y(DType::F32, yShape);
  llvm::Error err = runKernel(runConv, "Conv", a, {&x, &w, b}, {&y});
  EXPECT_EQ(errorText(std::move(err)), "");
  return y.f32s();
}

std::vector<double> convTranspose(const AttributeList &a, const OwnedTensor &x,
                                  const OwnedTensor &w, const OwnedTensor *b,
                                  llvm::ArrayRef<int64_t> yShape) {
  OwnedTensor y(DType::F32, yShape);
  llvm::Error err =
      runKernel(runConvTranspose, "ConvTranspose", a, {&x, &w, b}, {&y});
  EXPECT_EQ(errorText(std::move(err)), "");
  return y.f32s();
}

// The spec's example: 5x5 ramp, 3x3 ones, pads 1 keeps the size.
TEST(ConvTest, PaddedThreeByThree) {
  auto x = OwnedTensor::f32({1, 1, 5, 5}, iotaValues(25));
  auto w = OwnedTensor::f32({1, 1, 3, 3}, std::vector<double>(9, 1.0));
  EXPECT_EQ(conv(attrs({intsAttr("pads", {1, 1, 1, 1})}), x, w, nullptr,
                 {1, 1, 5, 5}),
            (std::vector<double>{12,  21,  27, 33,  24,  33,  54, 63,  72,
                                 51,  63,  99, 108, 117, 81,  93, 144, 153,
                                 162, 111, 72, 111, 117, 123, 84}));
  EXPECT_EQ(conv(attrs({intsAttr("kernel_shape", {3, 3})}), x, w, nullptr,
                 {1, 1, 3, 3}),
            (std::vector<double>{54, 63, 72, 99, 108, 117, 144, 153, 162}));
}

// Stride 2 with pads on the first axis only (top and bottom).
TEST(ConvTest, StridesWithAsymmetricPads) {
  auto x = OwnedTensor::f32({1, 1, 7, 5}, iotaValues(35));
  auto w = OwnedTensor::f32({1, 1, 3, 3}, std::vector<double>(9, 1.0));
  EXPECT_EQ(
      conv(attrs({intsAttr("pads", {1, 0, 1, 0}), intsAttr("strides", {2, 2})}),
           x, w, nullptr, {1, 1, 4, 2}),
      (std::vector<double>{21, 33, 99, 117, 189, 207, 171, 183}));
}

// Dilation 2: y[o] = x[o] + 10 x[o+2] + 100 x[o+4].
TEST(ConvTest, Dilation) {
  auto x = OwnedTensor::f32({1, 1, 7}, iotaValues(7));
  auto w = OwnedTensor::f32({1, 1, 3}, {1, 10, 100});
  EXPECT_EQ(conv(attrs({intsAttr("dilations", {2})}), x, w, nullptr, {1, 1, 3}),
            (std::vector<double>{420, 531, 642}));
}

// Two groups each see only their channel; the bias is per output channel.
TEST(ConvTest, GroupsAndBias) {
  auto x = OwnedTensor::f32({1, 2, 3}, {1, 2, 3, 10, 20, 30});
  auto w = OwnedTensor::f32({2, 1, 2}, {1, 1, 1, -1});
  auto b = OwnedTensor::f32({2}, {100, 200});
  EXPECT_EQ(conv(attrs({intAttr("group", 2)}), x, w, &b, {1, 2, 2}),
            (std::vector<double>{103, 105, 190, 190}));
}

// Depthwise with channel multiplier 2 through the 1x1 (pointwise) path.
TEST(ConvTest, DepthwiseMultiplierPointwise) {
  auto x = OwnedTensor::f32({1, 2, 1, 2}, {1, 2, 3, 4});
  auto w = OwnedTensor::f32({4, 1, 1, 1}, {1, 2, 3, 4});
  EXPECT_EQ(conv(attrs({intAttr("group", 2)}), x, w, nullptr, {1, 4, 1, 2}),
            (std::vector<double>{1, 2, 2, 4, 9, 12, 12, 16}));
}

// Depthwise 3x3 with pads: each channel convolved with its own kernel.
TEST(ConvTest, DepthwisePadded) {
  auto x = OwnedTensor::f32({1, 2, 2, 2}, {1, 2, 3, 4, 1, 1, 1, 1});
  std::vector<double> wv(18, 0.0);
  wv[4] = 1;     // channel 0: identity
  wv[9 + 0] = 1; // channel 1: reads the up-left neighbour
  auto w = OwnedTensor::f32({2, 1, 3, 3}, wv);
  EXPECT_EQ(conv(attrs({intAttr("group", 2), intsAttr("pads", {1, 1, 1, 1})}),
                 x, w, nullptr, {1, 2, 2, 2}),
            (std::vector<double>{1, 2, 3, 4, 0, 0, 0, 1}));
}

// Pointwise conv over two batch items and two input channels.
TEST(ConvTest, PointwiseBatch) {
  auto x = OwnedTensor::f32({2, 2, 1, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  auto w = OwnedTensor::f32({1, 2, 1, 1}, {1, 10});
  EXPECT_EQ(conv(attrs({}), x, w, nullptr, {2, 1, 1, 2}),
            (std::vector<double>{31, 42, 75, 86}));
}

// SAME_UPPER puts the odd pad at the end, SAME_LOWER at the start.
TEST(ConvTest, AutoPadSame) {
  auto x = OwnedTensor::f32({1, 1, 4}, {1, 2, 3, 4});
  auto w = OwnedTensor::f32({1, 1, 2}, {1, 10});
  EXPECT_EQ(conv(attrs({stringAttr("auto_pad", "SAME_UPPER")}), x, w, nullptr,
                 {1, 1, 4}),
            (std::vector<double>{21, 32, 43, 4}));
  EXPECT_EQ(conv(attrs({stringAttr("auto_pad", "SAME_LOWER")}), x, w, nullptr,
                 {1, 1, 4}),
            (std::vector<double>{10, 21, 32, 43}));
  EXPECT_EQ(
      conv(attrs({stringAttr("auto_pad", "VALID")}), x, w, nullptr, {1, 1, 3}),
      (std::vector<double>{21, 32, 43}));
}

// A 3-D kernel covering the whole 2x2x2 input sums it.
TEST(ConvTest, ThreeD) {
  auto x = OwnedTensor::f32({1, 1, 2, 2, 2}, iotaValues(8));
  auto w = OwnedTensor::f32({1, 1, 2, 2, 2}, std::vector<double>(8, 1.0));
  EXPECT_EQ(conv(attrs({}), x, w, nullptr, {1, 1, 1, 1, 1}),
            (std::vector<double>{28}));
}

// f64 and the 16-bit floats give the same small integers as f32.
TEST(ConvTest, OtherFloatTypes) {
  AttributeList a = attrs({intsAttr("pads", {1, 1, 1, 1})});
  std::vector<double> expected = {12,  21,  27, 33,  24,  33,  54, 63,  72,
                                  51,  63,  99, 108, 117, 81,  93, 144, 153,
                                  162, 111, 72, 111, 117, 123, 84};
  auto check = [&](auto tag, DType dt) {
    using T = decltype(tag);
    auto x = OwnedTensor::of<T>(dt, {1, 1, 5, 5}, iotaValues(25));
    auto w = OwnedTensor::of<T>(dt, {1, 1, 3, 3}, std::vector<double>(9, 1.0));
    OwnedTensor y(dt, {1, 1, 5, 5});
    EXPECT_EQ(errorText(runKernel(runConv, "Conv", a, {&x, &w}, {&y})), "");
    EXPECT_EQ(y.values<T>(), expected) << dtypeName(dt).str();
  };
  check(double{}, DType::F64);
  check(Half{}, DType::F16);
  check(BFloat16{}, DType::BF16);
}

// Shapes that do not fit the attributes are errors, not crashes.
TEST(ConvTest, BadShapesAreErrors) {
  auto x = OwnedTensor::f32({1, 2, 4}, iotaValues(8));
  auto w = OwnedTensor::f32({1, 2, 2}, iotaValues(4));
  OwnedTensor y(DType::F32, {1, 1, 2});
  EXPECT_NE(errorText(runKernel(runConv, "Conv", attrs({}), {&x, &w}, {&y})),
            "");
  OwnedTensor y3(DType::F32, {1, 1, 3});
  EXPECT_NE(errorText(runKernel(runConv, "Conv", attrs({intAttr("group", 2)}),
                                {&x, &w}, {&y3})),
            "");
  EXPECT_NE(errorText(runKernel(runConv, "Conv",
                                attrs({intsAttr("kernel_shape", {3})}),
                                {&x, &w}, {&y3})),
            "");
  EXPECT_NE(
      errorText(runKernel(runConv, "Conv", attrs({intsAttr("strides", {1, 1})}),
                          {&x, &w}, {&y3})),
      "");
  EXPECT_EQ(errorText(runKernel(runConv, "Conv", attrs({}), {&x, &w}, {&y3})),
            "");
}

/// Direct 2-D Conv / ConvTranspose (N=1, group 1) as references.
std::vector<double> naiveConv2d(const std::vector<double> &x, int64_t c,
                                int64_t h, int64_t wd,
                                const std::vector<double> &w, int64_t m,
                                int64_t k, int64_t stride, int64_t pad,
                                int64_t oh, int64_t ow) {
  std::vector<double> y(m * oh * ow, 0.0);
  for (int64_t mo = 0; mo < m; ++mo)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j) {
        double s = 0;
        for (int64_t ci = 0; ci < c; ++ci)
          for (int64_t a = 0; a < k; ++a)
            for (int64_t b = 0; b < k; ++b) {
              int64_t r = i * stride - pad + a, q = j * stride - pad + b;
              if (r >= 0 && r < h && q >= 0 && q < wd)
                s += x[(ci * h + r) * wd + q] *
                     w[((mo * c + ci) * k + a) * k + b];
            }
        y[(mo * oh + i) * ow + j] = s;
      }
  return y;
}

std::vector<double> randomValues(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> dist(-4, 4);
  std::vector<double> v(n);
  for (double &e : v)
    e = dist(gen); // small integers keep f32 sums exact
  return v;
}

// Large enough that the column matrix is built in several tiles whose
// boundary falls mid-image; compared with the direct loop.
TEST(ConvTest, TiledColumnsMatchDirect) {
  int64_t c = 64, h = 200, wd = 200, m = 2, k = 3;
  auto xv = randomValues(c * h * wd, 1), wv = randomValues(m * c * k * k, 2);
  auto x = OwnedTensor::f32({1, c, h, wd}, xv);
  auto w = OwnedTensor::f32({m, c, k, k}, wv);
  EXPECT_EQ(conv(attrs({intsAttr("pads", {1, 1, 1, 1})}), x, w, nullptr,
                 {1, m, h, wd}),
            naiveConv2d(xv, c, h, wd, wv, m, k, 1, 1, h, wd));
}

// ConvTranspose is the adjoint of Conv: <Conv(a), y> == <a, ConvT(y)>
// with the same weights, here with stride 2, pads and several tiles.
TEST(ConvTest, TransposeIsAdjointOfConv) {
  int64_t c = 64, m = 2, h = 201, wd = 203, k = 3;
  int64_t oh = (h + 2 - k) / 2 + 1, ow = (wd + 2 - k) / 2 + 1;
  auto av = randomValues(c * h * wd, 3), wv = randomValues(m * c * k * k, 4);
  auto yv = randomValues(m * oh * ow, 5);
  auto conved = naiveConv2d(av, c, h, wd, wv, m, k, 2, 1, oh, ow);
  // Conv's W [M, C, k, k] is ConvTranspose's W [C_in = M, C_out = C, k, k].
  auto y = OwnedTensor::f32({1, m, oh, ow}, yv);
  auto w = OwnedTensor::f32({m, c, k, k}, wv);
  auto back = convTranspose(
      attrs({intsAttr("strides", {2, 2}), intsAttr("pads", {1, 1, 1, 1})}), y,
      w, nullptr, {1, c, h, wd});
  double lhs = 0, rhs = 0;
  for (size_t i = 0; i < yv.size(); ++i)
    lhs += conved[i] * yv[i];
  for (size_t i = 0; i < av.size(); ++i)
    rhs += av[i] * back[i];
  EXPECT_EQ(lhs, rhs);
}

// Full 1-D transposed conv: every input spreads the kernel.
TEST(ConvTransposeTest, Basic) {
  auto x = OwnedTensor::f32({1, 1, 3}, {1, 2, 3});
  auto w = OwnedTensor::f32({1, 1, 3}, {1, 1, 1});
  EXPECT_EQ(convTranspose(attrs({}), x, w, nullptr, {1, 1, 5}),
            (std::vector<double>{1, 3, 6, 5, 3}));
}

// Stride 2, then pads trimming both ends, then output_padding adding one.
TEST(ConvTransposeTest, StridePadsOutputPadding) {
  auto x = OwnedTensor::f32({1, 1, 2}, {1, 2});
  auto w = OwnedTensor::f32({1, 1, 3}, {1, 10, 100});
  AttributeList s2 = attrs({intsAttr("strides", {2})});
  EXPECT_EQ(convTranspose(s2, x, w, nullptr, {1, 1, 5}),
            (std::vector<double>{1, 10, 102, 20, 200}));
  EXPECT_EQ(
      convTranspose(attrs({intsAttr("strides", {2}), intsAttr("pads", {1, 1})}),
                    x, w, nullptr, {1, 1, 3}),
      (std::vector<double>{10, 102, 20}));
  EXPECT_EQ(convTranspose(attrs({intsAttr("strides", {2}),
                                 intsAttr("output_padding", {1})}),
                          x, w, nullptr, {1, 1, 6}),
            (std::vector<double>{1, 10, 102, 20, 200, 0}));
}

// output_shape and auto_pad split the total pad as the spec says.
TEST(ConvTransposeTest, OutputShapeAndAutoPad) {
  auto x = OwnedTensor::f32({1, 1, 2}, {1, 2});
  auto w = OwnedTensor::f32({1, 1, 3}, {1, 10, 100});
  auto b = OwnedTensor::f32({1}, {5});
  // Total pad 1: NOTSET and SAME_LOWER trim the start, SAME_UPPER the end.
  EXPECT_EQ(convTranspose(attrs({intsAttr("strides", {2}),
                                 intsAttr("output_shape", {4})}),
                          x, w, nullptr, {1, 1, 4}),
            (std::vector<double>{10, 102, 20, 200}));
  EXPECT_EQ(convTranspose(attrs({intsAttr("strides", {2}),
                                 stringAttr("auto_pad", "SAME_UPPER")}),
                          x, w, nullptr, {1, 1, 4}),
            (std::vector<double>{1, 10, 102, 20}));
  EXPECT_EQ(convTranspose(attrs({intsAttr("strides", {2}),
                                 stringAttr("auto_pad", "SAME_LOWER")}),
                          x, w, nullptr, {1, 1, 4}),
            (std::vector<double>{10, 102, 20, 200}));
  // One more than the full output: a bias-only position at the end.
  EXPECT_EQ(convTranspose(attrs({intsAttr("strides", {2}),
                                 intsAttr("output_shape", {1, 1, 6})}),
                          x, w, &b, {1, 1, 6}),
            (std::vector<double>{6, 15, 107, 25, 205, 5}));
  // Two more would shift the result under the spec's split: refused.
  OwnedTensor y7(DType::F32, {1, 1, 7});
  std::string msg = errorText(runKernel(
      runConvTranspose, "ConvTranspose",
      attrs({intsAttr("strides", {2}), intsAttr("output_shape", {7})}),
      {&x, &w}, {&y7}));
  EXPECT_NE(msg.find("unsupported"), std::string::npos) << msg;
}

// Dilation 2 spreads the two taps two apart.
TEST(ConvTransposeTest, Dilation) {
  auto x = OwnedTensor::f32({1, 1, 2}, {1, 2});
  auto w = OwnedTensor::f32({1, 1, 2}, {1, 10});
  EXPECT_EQ(convTranspose(attrs({intsAttr("dilations", {2})}), x, w, nullptr,
                          {1, 1, 4}),
            (std::vector<double>{1, 2, 10, 20}));
}

// Groups: W is [C, M/group, k]; each input channel feeds its own group.
TEST(ConvTransposeTest, Groups) {
  auto x = OwnedTensor::f32({1, 2, 1}, {1, 2});
  auto w = OwnedTensor::f32({2, 1, 2}, {1, 2, 3, 4});
  EXPECT_EQ(
      convTranspose(attrs({intAttr("group", 2)}), x, w, nullptr, {1, 2, 2}),
      (std::vector<double>{1, 2, 6, 8}));
}

// A 1x1 kernel with stride 1 takes the direct GEMM path.
TEST(ConvTransposeTest, Pointwise) {
  auto x = OwnedTensor::f32({1, 2, 1, 2}, {1, 2, 3, 4});
  auto w = OwnedTensor::f32({2, 1, 1, 1}, {1, 10});
  auto b = OwnedTensor::f32({1}, {0.5});
  EXPECT_EQ(convTranspose(attrs({}), x, w, &b, {1, 1, 1, 2}),
            (std::vector<double>{31.5, 42.5}));
}

// A Y shape that the attributes do not give is an error.
TEST(ConvTransposeTest, BadOutputShapeIsError) {
  auto x = OwnedTensor::f32({1, 1, 2}, {1, 2});
  auto w = OwnedTensor::f32({1, 1, 3}, {1, 10, 100});
  OwnedTensor y(DType::F32, {1, 1, 5});
  EXPECT_NE(errorText(runKernel(
                runConvTranspose, "ConvTranspose",
                attrs({intsAttr("strides", {2}), intsAttr("pads", {1, 1})}),
                {&x, &w}, {&y})),
            "");
}

} // namespace
