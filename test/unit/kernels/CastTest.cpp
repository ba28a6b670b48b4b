//===- CastTest.cpp - Cast rounding, truncation and wrapping rules --------===//
#include "test/unit/kernels/KernelCallHelpers.h"
#include <cmath>
#include <gtest/gtest.h>
#include <limits>

using namespace zinc;
using namespace zinc::cpu;
using namespace zinc::cpu::test;

namespace {

using V = std::vector<double>;

std::string cast(const OwnedTensor &x, OwnedTensor &y) {
  AttributeList a = attrs({intAttr("to", static_cast<int64_t>(y.ref.dtype))});
  return errorText(runKernel(runCast, "Cast", a, {&x}, {&y}));
}

// float -> f16 rounds to nearest even, overflows to inf past the last
// representable value's rounding boundary.
TEST(CastKernel, FloatToHalfRoundsToNearestEven) {
  OwnedTensor x = OwnedTensor::f32({5}, {2049, 2051, 65519, 65520, -1e-8});
  OwnedTensor y(DType::F16, {5});
  ASSERT_EQ(cast(x, y), "");
  V got = y.values<Half>();
  EXPECT_EQ(got[0], 2048);
  EXPECT_EQ(got[1], 2052);
  EXPECT_EQ(got[2], 65504);
  EXPECT_EQ(got[3], INFINITY);
  EXPECT_EQ(got[4], 0);
  EXPECT_TRUE(std::signbit(got[4]));
}

// bf16 rounds to nearest even (as PyTorch does), not by truncation.
TEST(CastKernel, FloatToBf16Rounds) {
  OwnedTensor x = OwnedTensor::f32({3}, {0.48033667, 1.00390625, 1.01171875});
  OwnedTensor y(DType::BF16, {3});
  ASSERT_EQ(cast(x, y), "");
  // 0.48033667 lies nearer 0.48046875 than the truncated 0.478515625;
  // 1 + 2^-8 and 1 + 3 * 2^-8 are ties that go to the even neighbour.
  EXPECT_EQ(y.values<BFloat16>(), V({0.48046875, 1, 1.015625}));
}

// double -> f16 is rounded once: via float with round-to-nearest twice,
// 1 + 2^-11 + 2^-40 would first become the tie 1 + 2^-11 and then 1.
TEST(CastKernel, DoubleToHalfRoundsOnce) {
  double v = 1 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  OwnedTensor x = OwnedTensor::of<double>(DType::F64, {2}, {v, -v});
  OwnedTensor y(DType::F16, {2});
  ASSERT_EQ(cast(x, y), "");
  EXPECT_EQ(y.values<Half>(),
            V({1 + std::ldexp(1.0, -10), -1 - std::ldexp(1.0, -10)}));
  OwnedTensor b(DType::BF16, {2});
  double w = 1 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40);
  OwnedTensor xb = OwnedTensor::of<double>(DType::F64, {2}, {w, 3});
  ASSERT_EQ(cast(xb, b), "");
  EXPECT_EQ(b.values<BFloat16>(), V({1 + std::ldexp(1.0, -7), 3}));
}

// Float -> integer truncates toward zero; NaN and out-of-range values (left
// undefined by ONNX) become 0 and the nearest bound instead of UB.
TEST(CastKernel, FloatToIntTruncates) {
  OwnedTensor x = OwnedTensor::f32({6}, {2.7, -2.7, -0.5, NAN, 1e10, -1e10});
  OwnedTensor y(DType::I32, {6});
  ASSERT_EQ(cast(x, y), "");
  EXPECT_EQ(y.values<int32_t>(), V({2, -2, 0, 0, 2147483647.0, -2147483648.0}));
  OwnedTensor h = OwnedTensor::of<Half>(DType::F16, {2}, {-3.5, 300});
  OwnedTensor u(DType::U8, {2});
  ASSERT_EQ(cast(h, u), "");
  EXPECT_EQ(u.values<uint8_t>(), V({0, 255}));
}

// Integer -> narrower integer wraps like numpy's astype.
TEST(CastKernel, IntegerNarrowingWraps) {
  OwnedTensor x = OwnedTensor::ints({4}, {300, -129, -1, 127});
  OwnedTensor y(DType::I8, {4});
  ASSERT_EQ(cast(x, y), "");
  EXPECT_EQ(y.values<int8_t>(), V({44, 127, -1, 127}));
  OwnedTensor u(DType::U16, {4});
  ASSERT_EQ(cast(x, u), "");
  EXPECT_EQ(u.values<uint16_t>(), V({300, 65407, 65535, 127}));
  OwnedTensor f(DType::F64, {4});
  ASSERT_EQ(cast(x, f), "");
  EXPECT_EQ(f.values<double>(), V({300, -129, -1, 127}));
}

// Anything -> bool is != 0 (NaN is true); bool -> numbers is 0 / 1.
TEST(CastKernel, BoolConversions) {
  OwnedTensor x = OwnedTensor::f32({4}, {0, -0.0, 0.25, NAN});
  OwnedTensor b(DType::Bool, {4});
  ASSERT_EQ(cast(x, b), "");
  EXPECT_EQ(b.values<bool>(), V({0, 0, 1, 1}));
  OwnedTensor i = OwnedTensor::ints({2}, {0, -7});
  OwnedTensor ib(DType::Bool, {2});
  ASSERT_EQ(cast(i, ib), "");
  EXPECT_EQ(ib.values<bool>(), V({0, 1}));
  OwnedTensor back(DType::BF16, {4});
  ASSERT_EQ(cast(b, back), "");
  EXPECT_EQ(back.values<BFloat16>(), V({0, 0, 1, 1}));
}

// Every pair of types round-trips small integers exactly.
TEST(CastKernel, EveryPairKeepsSmallIntegers) {
  DType all[] = {DType::F32, DType::F64, DType::F16, DType::BF16,
                 DType::I8,  DType::I16, DType::I32, DType::I64,
                 DType::U8,  DType::U16, DType::U32, DType::U64};
  V vals = {0, 1, 7, 100};
  for (DType from : all)
    for (DType to : all) {
      OwnedTensor x(from, {4});
      visitDType(from, [&](auto tag) {
        using T = decltype(tag);
        for (size_t k = 0; k < vals.size(); ++k)
          x.ref.as<T>()[k] = store<T>(vals[k]);
      });
      OwnedTensor y(to, {4});
      ASSERT_EQ(cast(x, y), "")
          << dtypeName(from).str() << "->" << dtypeName(to).str();
      V got =
          visitDType(to, [&](auto tag) { return y.values<decltype(tag)>(); });
      EXPECT_EQ(got, vals) << dtypeName(from).str() << "->"
                           << dtypeName(to).str();
    }
}

TEST(CastKernel, CastLikeTakesLikesType) {
  // like's shape and values are not read: only its element type matters.
  OwnedTensor x = OwnedTensor::f32({3}, {1.5, -2.75, 1e6});
  OwnedTensor like = OwnedTensor::of<Half>(DType::F16, {1}, {0});
  OwnedTensor y(DType::F16, {3});
  ASSERT_EQ(
      errorText(runKernel(runCastLike, "CastLike", {}, {&x, &like}, {&y})), "");
  EXPECT_EQ(y.values<Half>(), (std::vector<double>{1.5, -2.75, INFINITY}));
  OwnedTensor i = OwnedTensor::i64({}, {0}), yi(DType::I64, {3});
  ASSERT_EQ(errorText(runKernel(runCastLike, "CastLike", {}, {&x, &i}, {&yi})),
            "");
  EXPECT_EQ(yi.i64s(), (std::vector<double>{1, -2, 1000000}));
}

TEST(CastKernel, CastLikeErrors) {
  OwnedTensor x = OwnedTensor::f32({2}, {1, 2}), y(DType::F16, {2});
  OwnedTensor like = OwnedTensor::f32({}, {0});
  EXPECT_EQ(
      errorText(runKernel(runCastLike, "CastLike", {}, {&x, &like}, {&y})),
      "CastLike: output has element type f16 but like has f32");
  EXPECT_EQ(errorText(runKernel(runCastLike, "CastLike", {}, {&x}, {&y})),
            "CastLike: expects inputs (input, like) and an output");
}

TEST(CastKernel, Errors) {
  OwnedTensor x = OwnedTensor::f32({2}, {1, 2});
  OwnedTensor y(DType::F16, {2});
  AttributeList toString = attrs({intAttr("to", 8)});
  EXPECT_EQ(errorText(runKernel(runCast, "Cast", toString, {&x}, {&y})),
            "unsupported: Cast to ONNX element type 8");
  AttributeList toF64 = attrs({intAttr("to", 11)});
  EXPECT_EQ(errorText(runKernel(runCast, "Cast", toF64, {&x}, {&y})),
            "Cast: attribute to=f64 but the output has element type f16");
  OwnedTensor z(DType::F16, {3});
  EXPECT_EQ(cast(x, z), "Cast: output shape [3] differs from input shape [2]");
}

} // namespace
