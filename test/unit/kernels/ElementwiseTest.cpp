//===- ElementwiseTest.cpp - Arithmetic, math, comparison and Where kernels
//-===//
#include "test/unit/kernels/KernelCallHelpers.h"
#include <cmath>
#include <gtest/gtest.h>
#include <limits>

using namespace zinc;
using namespace zinc::cpu;
using namespace zinc::cpu::test;

namespace {

using V = std::vector<double>;

/// Values 0.5, -1.25, 2.0, ... of a given length, not all integers.
V ramp(int64_t n, double scale = 0.25) {
  V v(n);
  for (int64_t i = 0; i < n; ++i)
    v[i] = ((i * 7) % 13 - 6) * scale;
  return v;
}

/// Reads `v` laid out as `in` at the indices of `out` (numpy broadcasting).
V broadcastNaive(const V &v, llvm::ArrayRef<int64_t> in,
                 llvm::ArrayRef<int64_t> out) {
  llvm::SmallVector<int64_t, 6> s = broadcastStrides(in, out);
  V r(numElements(out));
  for (int64_t i = 0; i < static_cast<int64_t>(r.size()); ++i) {
    int64_t rem = i, off = 0;
    for (size_t d = out.size(); d-- > 0;) {
      off += (rem % out[d]) * s[d];
      rem /= out[d];
    }
    r[i] = v[off];
  }
  return r;
}

std::string binary(KernelFn fn, llvm::StringRef op, const OwnedTensor &a,
                   const OwnedTensor &b, OwnedTensor &y) {
  return errorText(runKernel(fn, op, attrs({}), {&a, &b}, {&y}));
}

// A middle-axis broadcast that cannot be coalesced, and a bias add that
// coalesces into rows; both against a naive broadcast.
TEST(ElementwiseKernels, AddBroadcastsLikeNumpy) {
  struct Case {
    std::vector<int64_t> a, b, out;
  } cases[] = {{{2, 3, 4}, {3, 1}, {2, 3, 4}},
               {{4, 1, 5}, {1, 3, 1}, {4, 3, 5}},
               {{6, 5}, {5}, {6, 5}},
               {{}, {2, 2}, {2, 2}}};
  for (const Case &c : cases) {
    V av = ramp(numElements(c.a)), bv = ramp(numElements(c.b), 0.5);
    OwnedTensor a = OwnedTensor::f32(c.a, av), b = OwnedTensor::f32(c.b, bv);
    OwnedTensor y(DType::F32, c.out);
    ASSERT_EQ(binary(runAdd, "Add", a, b, y), "");
    V ea = broadcastNaive(av, c.a, c.out), eb = broadcastNaive(bv, c.b, c.out);
    V got = y.f32s();
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_EQ(got[i], ea[i] + eb[i]) << formatShape(c.out) << " at " << i;
  }
}

// Outputs large enough to be split over threads, including rows cut into
// pieces and many short rows.
TEST(ElementwiseKernels, LargeBroadcastsSplitCorrectly) {
  struct Case {
    std::vector<int64_t> a, b, out;
  } cases[] = {{{3, 40001}, {40001}, {3, 40001}},
               {{20000, 3}, {20000, 1}, {20000, 3}},
               {{70001}, {}, {70001}},
               {{7, 1, 9000}, {1, 5, 1}, {7, 5, 9000}}};
  for (const Case &c : cases) {
    V av = ramp(numElements(c.a)), bv = ramp(numElements(c.b), 0.5);
    OwnedTensor a = OwnedTensor::f32(c.a, av), b = OwnedTensor::f32(c.b, bv);
    OwnedTensor y(DType::F32, c.out);
    ASSERT_EQ(binary(runMul, "Mul", a, b, y), "");
    V ea = broadcastNaive(av, c.a, c.out), eb = broadcastNaive(bv, c.b, c.out);
    V got = y.f32s();
    int64_t bad = 0;
    for (size_t i = 0; i < got.size(); ++i)
      bad += got[i] != static_cast<double>(static_cast<float>(ea[i] * eb[i]));
    EXPECT_EQ(bad, 0) << formatShape(c.out);
  }
}

TEST(ElementwiseKernels, IntegerArithmeticWraps) {
  auto u8 = [](V v) { return OwnedTensor::of<uint8_t>(DType::U8, {3}, v); };
  OwnedTensor a = u8({250, 3, 0}), b = u8({10, 5, 1}), y(DType::U8, {3});
  ASSERT_EQ(binary(runAdd, "Add", a, b, y), "");
  EXPECT_EQ(y.values<uint8_t>(), V({4, 8, 1}));
  ASSERT_EQ(binary(runSub, "Sub", a, b, y), "");
  EXPECT_EQ(y.values<uint8_t>(), V({240, 254, 255}));
  ASSERT_EQ(binary(runMul, "Mul", a, b, y), "");
  EXPECT_EQ(y.values<uint8_t>(), V({196, 15, 0}));

  int64_t big = std::numeric_limits<int64_t>::max();
  OwnedTensor x = OwnedTensor::ints({2}, {big, -5}),
              one = OwnedTensor::ints({1}, {1});
  OwnedTensor z(DType::I64, {2});
  ASSERT_EQ(binary(runAdd, "Add", x, one, z), "");
  EXPECT_EQ(z.ref.as<int64_t>()[0], std::numeric_limits<int64_t>::min());
  EXPECT_EQ(z.ref.as<int64_t>()[1], -4);
}

// Integer division truncates toward zero like C; INT_MIN / -1 wraps rather
// than trapping; a zero divisor is an error, not a crash.
TEST(ElementwiseKernels, IntegerDivisionTruncates) {
  auto i32 = [](V v) {
    return OwnedTensor::of<int32_t>(DType::I32, {int64_t(v.size())}, v);
  };
  OwnedTensor a = i32({-7, 7, -7, -2147483648.0}), b = i32({2, -2, -2, -1});
  OwnedTensor y(DType::I32, {4});
  ASSERT_EQ(binary(runDiv, "Div", a, b, y), "");
  EXPECT_EQ(y.values<int32_t>(), V({-3, -3, 3, -2147483648.0}));
  OwnedTensor zero = i32({0, 1, 1, 1});
  EXPECT_EQ(binary(runDiv, "Div", a, zero, y), "Div: integer division by zero");

  OwnedTensor fa = OwnedTensor::f32({2}, {1, -1}),
              fz = OwnedTensor::f32({1}, {0});
  OwnedTensor fy(DType::F32, {2});
  ASSERT_EQ(binary(runDiv, "Div", fa, fz, fy), "");
  EXPECT_EQ(fy.f32s(), V({INFINITY, -INFINITY}));
}

// The result has the base's type; an integer base with a float exponent is
// truncated; integer powers are exact and a negative exponent truncates.
TEST(ElementwiseKernels, PowMixedTypes) {
  OwnedTensor fb = OwnedTensor::f32({3}, {2, -3, 0.5});
  OwnedTensor ie = OwnedTensor::ints({3}, {3, 2, -2});
  OwnedTensor fy(DType::F32, {3});
  ASSERT_EQ(binary(runPow, "Pow", fb, ie, fy), "");
  EXPECT_EQ(fy.f32s(), V({8, 9, 4}));

  OwnedTensor ib = OwnedTensor::of<int32_t>(DType::I32, {4}, {2, 3, 9, -8});
  OwnedTensor fe = OwnedTensor::f32({4}, {0.5, 2, 0.5, 1});
  OwnedTensor iy(DType::I32, {4});
  ASSERT_EQ(binary(runPow, "Pow", ib, fe, iy), "");
  EXPECT_EQ(iy.values<int32_t>(), V({1, 9, 3, -8}));

  OwnedTensor lb = OwnedTensor::ints({4}, {3, 2, -1, 1});
  OwnedTensor le = OwnedTensor::ints({4}, {39, -1, -3, -4});
  OwnedTensor ly(DType::I64, {4});
  ASSERT_EQ(binary(runPow, "Pow", lb, le, ly), "");
  const int64_t *p = ly.ref.as<int64_t>();
  EXPECT_EQ(p[0], 4052555153018976267LL); // 3^39, exact in int64
  EXPECT_EQ(p[1], 0);
  EXPECT_EQ(p[2], -1);
  EXPECT_EQ(p[3], 1);
}

// f16 and bf16 are computed in float and rounded once, to nearest even.
TEST(ElementwiseKernels, SixteenBitFloatsRoundOnce) {
  double ulpHalf = std::ldexp(1.0, -11); // half an f16 ulp at 1
  OwnedTensor a = OwnedTensor::of<Half>(DType::F16, {2}, {1, 1 + 2 * ulpHalf});
  OwnedTensor b = OwnedTensor::of<Half>(DType::F16, {1}, {ulpHalf});
  OwnedTensor y(DType::F16, {2});
  ASSERT_EQ(binary(runAdd, "Add", a, b, y), "");
  // Ties: 1 + ulp/2 goes down to even 1, (1 + ulp) + ulp/2 up to 1 + 2 ulp.
  EXPECT_EQ(y.values<Half>(), V({1, 1 + 4 * ulpHalf}));

  // bf16 has 8 significant bits: ties at 1 + 2^-8 go to even.
  OwnedTensor c = OwnedTensor::of<BFloat16>(DType::BF16, {2}, {1, 1.0078125});
  OwnedTensor d =
      OwnedTensor::of<BFloat16>(DType::BF16, {}, {std::ldexp(1.0, -8)});
  OwnedTensor e(DType::BF16, {2});
  ASSERT_EQ(binary(runAdd, "Add", c, d, e), "");
  EXPECT_EQ(e.values<BFloat16>(), V({1, 1.015625}));
}

std::string unary(KernelFn fn, llvm::StringRef op, const OwnedTensor &x,
                  OwnedTensor &y, const AttributeList &a = attrs({})) {
  return errorText(runKernel(fn, op, a, {&x}, {&y}));
}

TEST(ElementwiseKernels, FloatMathMatchesLibm) {
  V xs = {0.25, 1.5, 3, 0.75};
  OwnedTensor x = OwnedTensor::of<double>(DType::F64, {4}, xs);
  OwnedTensor y(DType::F64, {4});
  struct Case {
    KernelFn fn;
    const char *op;
    double (*ref)(double);
  } cases[] = {
      {runSqrt, "Sqrt", [](double v) { return std::sqrt(v); }},
      {runReciprocal, "Reciprocal", [](double v) { return 1 / v; }},
      {runExp, "Exp", [](double v) { return std::exp(v); }},
      {runLog, "Log", [](double v) { return std::log(v); }},
      {runErf, "Erf", [](double v) { return std::erf(v); }},
      {runTanh, "Tanh", [](double v) { return std::tanh(v); }},
      {runSigmoid, "Sigmoid", [](double v) { return 1 / (1 + std::exp(-v)); }},
  };
  for (const Case &c : cases) {
    ASSERT_EQ(unary(c.fn, c.op, x, y), "") << c.op;
    for (size_t i = 0; i < xs.size(); ++i)
      EXPECT_DOUBLE_EQ(y.values<double>()[i], c.ref(xs[i])) << c.op;
  }
  // Sigmoid saturates without NaN at the extremes.
  OwnedTensor ext = OwnedTensor::f32({2}, {-1000, 1000});
  OwnedTensor ey(DType::F32, {2});
  ASSERT_EQ(unary(runSigmoid, "Sigmoid", ext, ey), "");
  EXPECT_EQ(ey.f32s(), V({0, 1}));
}

TEST(ElementwiseKernels, ReluNegLeakyRelu) {
  OwnedTensor x = OwnedTensor::f32({4}, {-2, 0, 3, NAN});
  OwnedTensor y(DType::F32, {4});
  ASSERT_EQ(unary(runRelu, "Relu", x, y), "");
  V r = y.f32s();
  EXPECT_EQ(r[0], 0);
  EXPECT_EQ(r[2], 3);
  EXPECT_TRUE(std::isnan(r[3])); // NaN propagates as in numpy.maximum

  ASSERT_EQ(unary(runLeakyRelu, "LeakyRelu", x, y), "");
  EXPECT_FLOAT_EQ(y.f32s()[0], -0.02f); // default alpha 0.01
  ASSERT_EQ(
      unary(runLeakyRelu, "LeakyRelu", x, y, attrs({floatAttr("alpha", 0.5)})),
      "");
  EXPECT_EQ(y.f32s()[0], -1);
  EXPECT_EQ(y.f32s()[2], 3);

  OwnedTensor i8 = OwnedTensor::of<int8_t>(DType::I8, {3}, {-128, -3, 5});
  OwnedTensor i8y(DType::I8, {3});
  ASSERT_EQ(unary(runNeg, "Neg", i8, i8y), "");
  EXPECT_EQ(i8y.values<int8_t>(), V({-128, 3, -5})); // -(-128) wraps
  ASSERT_EQ(unary(runRelu, "Relu", i8, i8y), "");
  EXPECT_EQ(i8y.values<int8_t>(), V({0, 0, 5}));
}

TEST(ElementwiseKernels, ClipBoundsFromInputs) {
  OwnedTensor x = OwnedTensor::f32({6}, {-7, 0, 2.5, 6, 9, NAN});
  OwnedTensor lo = OwnedTensor::f32({}, {0}), hi = OwnedTensor::f32({}, {6});
  OwnedTensor y(DType::F32, {6});
  ASSERT_EQ(errorText(runKernel(runClip, "Clip", {}, {&x, &lo, &hi}, {&y})),
            "");
  V r = y.f32s();
  EXPECT_EQ(V(r.begin(), r.begin() + 5), V({0, 0, 2.5, 6, 6}));
  EXPECT_TRUE(std::isnan(r[5])); // NaN passes through, as in numpy.clip
  // An absent bound is unbounded on that side.
  ASSERT_EQ(errorText(runKernel(runClip, "Clip", {}, {&x, nullptr, &hi}, {&y})),
            "");
  EXPECT_EQ(y.f32s()[0], -7);
  EXPECT_EQ(y.f32s()[4], 6);
  ASSERT_EQ(errorText(runKernel(runClip, "Clip", {}, {&x, &lo}, {&y})), "");
  EXPECT_EQ(y.f32s()[0], 0);
  EXPECT_EQ(y.f32s()[4], 9);
  // min > max gives max everywhere (numpy.clip, ONNX).
  ASSERT_EQ(errorText(runKernel(runClip, "Clip", {}, {&x, &hi, &lo}, {&y})),
            "");
  r = y.f32s();
  EXPECT_EQ(V(r.begin(), r.begin() + 5), V({0, 0, 0, 0, 0}));
}

TEST(ElementwiseKernels, ClipIntegersAndHalf) {
  OwnedTensor x = OwnedTensor::of<int8_t>(DType::I8, {4}, {-128, -3, 5, 127});
  OwnedTensor lo = OwnedTensor::of<int8_t>(DType::I8, {}, {-4});
  OwnedTensor hi = OwnedTensor::of<int8_t>(DType::I8, {}, {100});
  OwnedTensor y(DType::I8, {4});
  ASSERT_EQ(errorText(runKernel(runClip, "Clip", {}, {&x, &lo, &hi}, {&y})),
            "");
  EXPECT_EQ(y.values<int8_t>(), V({-4, -3, 5, 100}));
  // Without bounds an integer Clip is the identity (no overflow at the ends).
  ASSERT_EQ(errorText(runKernel(runClip, "Clip", {}, {&x}, {&y})), "");
  EXPECT_EQ(y.values<int8_t>(), V({-128, -3, 5, 127}));

  OwnedTensor h = OwnedTensor::of<Half>(DType::F16, {3}, {-1, 0.5, 7});
  OwnedTensor hlo = OwnedTensor::of<Half>(DType::F16, {}, {0});
  OwnedTensor hhi = OwnedTensor::of<Half>(DType::F16, {}, {6});
  OwnedTensor hy(DType::F16, {3});
  ASSERT_EQ(errorText(runKernel(runClip, "Clip", {}, {&h, &hlo, &hhi}, {&hy})),
            "");
  EXPECT_EQ(hy.values<Half>(), V({0, 0.5, 6}));
}

TEST(ElementwiseKernels, ClipAttributesBeforeOpset11) {
  OwnedTensor x = OwnedTensor::f32({3}, {-2, 0.5, 3});
  OwnedTensor y(DType::F32, {3});
  ASSERT_EQ(errorText(runKernel(
                runClip, "Clip",
                attrs({floatAttr("min", -1), floatAttr("max", 1)}), {&x}, {&y},
                /*opset=*/6)),
            "");
  EXPECT_EQ(y.f32s(), V({-1, 0.5, 1}));
  // Defaults: float's whole range.
  ASSERT_EQ(errorText(runKernel(runClip, "Clip", attrs({floatAttr("min", 0)}),
                                {&x}, {&y}, /*opset=*/6)),
            "");
  EXPECT_EQ(y.f32s(), V({0, 0.5, 3}));
}

TEST(ElementwiseKernels, ClipDiagnostics) {
  OwnedTensor x = OwnedTensor::f32({3}, {1, 2, 3}), y(DType::F32, {3});
  OwnedTensor two = OwnedTensor::f32({2}, {0, 1});
  EXPECT_EQ(errorText(runKernel(runClip, "Clip", {}, {&x, &two}, {&y})),
            "Clip: min must be a scalar, has shape [2]");
  OwnedTensor i = OwnedTensor::i64({}, {1});
  EXPECT_EQ(errorText(runKernel(runClip, "Clip", {}, {&x, nullptr, &i}, {&y})),
            "Clip: max has element type i64, expected f32");
  OwnedTensor b(DType::Bool, {3}), by(DType::Bool, {3});
  EXPECT_EQ(errorText(runKernel(runClip, "Clip", {}, {&b}, {&by})),
            "unsupported: Clip with element type bool");
  OwnedTensor y2(DType::F32, {2});
  EXPECT_EQ(errorText(runKernel(runClip, "Clip", {}, {&x}, {&y2})),
            "Clip: output shape [2] differs from input shape [3]");
}

TEST(ElementwiseKernels, GeluBothApproximations) {
  V xs = {-3, -0.5, 0, 0.7, 2.5};
  OwnedTensor x = OwnedTensor::of<double>(DType::F64, {5}, xs);
  OwnedTensor y(DType::F64, {5});
  ASSERT_EQ(unary(runGelu, "Gelu", x, y), "");
  for (size_t i = 0; i < xs.size(); ++i)
    EXPECT_DOUBLE_EQ(y.values<double>()[i],
                     0.5 * xs[i] * (1 + std::erf(xs[i] / std::sqrt(2.0))));
  ASSERT_EQ(
      unary(runGelu, "Gelu", x, y, attrs({stringAttr("approximate", "tanh")})),
      "");
  for (size_t i = 0; i < xs.size(); ++i) {
    double v = xs[i];
    double t = std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v));
    EXPECT_NEAR(y.values<double>()[i], 0.5 * v * (1 + t), 1e-15);
  }
  EXPECT_EQ(
      unary(runGelu, "Gelu", x, y, attrs({stringAttr("approximate", "fast")})),
      "unsupported: Gelu with approximate=\"fast\"");
}

TEST(ElementwiseKernels, TypeAndShapeErrors) {
  OwnedTensor i = OwnedTensor::ints({2}, {1, 4});
  OwnedTensor iy(DType::I64, {2});
  EXPECT_EQ(unary(runSqrt, "Sqrt", i, iy),
            "unsupported: Sqrt with element type i64");
  OwnedTensor a = OwnedTensor::f32({2, 3}, ramp(6)),
              b = OwnedTensor::f32({2}, {1, 2});
  OwnedTensor y(DType::F32, {2, 3});
  EXPECT_EQ(binary(runAdd, "Add", a, b, y),
            "shapes [2,3] and [2] do not broadcast");
  OwnedTensor wrong(DType::F32, {3, 2});
  OwnedTensor c = OwnedTensor::f32({3}, {1, 2, 3});
  EXPECT_EQ(binary(runAdd, "Add", a, c, wrong),
            "Add: output shape [3,2] is not the broadcast shape [2,3]");
  OwnedTensor i3 = OwnedTensor::ints({3}, {1, 2, 3});
  EXPECT_EQ(binary(runAdd, "Add", a, i3, y),
            "Add: element types f32 and i64 differ");
}

TEST(ElementwiseKernels, ComparisonsGiveBool) {
  OwnedTensor a = OwnedTensor::f32({2, 3}, {1, 2, 3, NAN, 5, 6});
  OwnedTensor b = OwnedTensor::f32({3}, {1, 5, 2});
  OwnedTensor y(DType::Bool, {2, 3});
  ASSERT_EQ(binary(runEqual, "Equal", a, b, y), "");
  EXPECT_EQ(y.values<bool>(), V({1, 0, 0, 0, 1, 0})); // NaN == x is false
  ASSERT_EQ(binary(runLess, "Less", a, b, y), "");
  EXPECT_EQ(y.values<bool>(), V({0, 1, 0, 0, 0, 0}));
  ASSERT_EQ(binary(runGreater, "Greater", a, b, y), "");
  EXPECT_EQ(y.values<bool>(), V({0, 0, 1, 0, 0, 1}));

  OwnedTensor h = OwnedTensor::of<Half>(DType::F16, {2}, {0.5, -1});
  OwnedTensor g = OwnedTensor::of<Half>(DType::F16, {}, {0});
  OwnedTensor hy(DType::Bool, {2});
  ASSERT_EQ(binary(runGreater, "Greater", h, g, hy), "");
  EXPECT_EQ(hy.values<bool>(), V({1, 0}));

  OwnedTensor notBool(DType::F32, {2, 3});
  EXPECT_EQ(binary(runLess, "Less", a, b, notBool),
            "unsupported: Less with element type f32");
}

TEST(ElementwiseKernels, NotAndWhere) {
  auto bools = [](llvm::ArrayRef<int64_t> shape, V v) {
    return OwnedTensor::of<bool>(DType::Bool, shape, v);
  };
  OwnedTensor a = bools({1, 2, 1}, {1, 0}),
              b = bools({3, 1, 2}, {1, 0, 1, 1, 0, 0});
  OwnedTensor y(DType::Bool, {3, 2, 2});
  ASSERT_EQ(binary(runAnd, "And", a, b, y), "");
  EXPECT_EQ(y.values<bool>(), V({1, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0}));
  OwnedTensor n(DType::Bool, {1, 2, 1});
  ASSERT_EQ(unary(runNot, "Not", a, n), "");
  EXPECT_EQ(n.values<bool>(), V({0, 1}));
  OwnedTensor f = OwnedTensor::f32({1}, {1});
  OwnedTensor fy(DType::F32, {1});
  EXPECT_EQ(unary(runNot, "Not", f, fy),
            "unsupported: Not with element type f32");

  // Condition [2,1], X a scalar, Y [1,3]: every operand broadcasts.
  OwnedTensor c = bools({2, 1}, {1, 0});
  OwnedTensor x = OwnedTensor::ints({}, {7});
  OwnedTensor z = OwnedTensor::ints({1, 3}, {1, 2, 3});
  OwnedTensor w(DType::I64, {2, 3});
  ASSERT_EQ(
      errorText(runKernel(runWhere, "Where", attrs({}), {&c, &x, &z}, {&w})),
      "");
  EXPECT_EQ(w.i64s(), V({7, 7, 7, 1, 2, 3}));
  OwnedTensor hx = OwnedTensor::of<Half>(DType::F16, {2, 1}, {0.5, 1.5});
  OwnedTensor hz = OwnedTensor::of<Half>(DType::F16, {3}, {-1, -2, -3});
  OwnedTensor hw(DType::F16, {2, 3});
  OwnedTensor c2 = bools({3}, {1, 0, 1});
  ASSERT_EQ(errorText(runKernel(runWhere, "Where", attrs({}), {&c2, &hx, &hz},
                                {&hw})),
            "");
  EXPECT_EQ(hw.values<Half>(), V({0.5, -2, 0.5, 1.5, -2, 1.5}));
}

} // namespace
