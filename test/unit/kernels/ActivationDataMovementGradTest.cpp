//===- ActivationDataMovementGradTest.cpp - Activation, scatter grads -----===//
//
// The autodiff finite-difference tests check these kernels in float64; here
// the float32, float16 and bfloat16 paths are compared with the float64 path
// on the same (rounded) inputs, GeluGrad (which no ONNX model of the opsets
// zinc imports can contain) is compared with a finite difference of the
// Gelu kernel, and the points a finite difference cannot check (Relu at 0)
// and the kernels' diagnostics are checked directly.
//
//===----------------------------------------------------------------------===//
#include "test/unit/kernels/KernelCallHelpers.h"
#include <cmath>
#include <gtest/gtest.h>
#include <random>

using namespace zinc;
using namespace zinc::cpu;
using namespace zinc::cpu::test;

namespace {

using V = std::vector<double>;

/// `values` rounded to `dtype` and widened back.
V rounded(DType dtype, const V &values) {
  return visitDType(dtype, [&](auto tag) -> V {
    using T = decltype(tag);
    V out;
    for (double v : values)
      out.push_back(static_cast<double>(load(store<T>(v))));
    return out;
  });
}

OwnedTensor tensorOf(DType dtype, llvm::ArrayRef<int64_t> shape, const V &v) {
  return visitDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    return OwnedTensor::of<T>(dtype, shape, v);
  });
}

V valuesOf(const OwnedTensor &t) {
  return visitDType(t.ref.dtype, [&](auto tag) {
    using T = decltype(tag);
    return t.values<T>();
  });
}

/// Relative accuracy each dtype's result is held to against float64.
double toleranceOf(DType dtype) {
  switch (dtype) {
  case DType::F16:
    return 2e-3;
  case DType::BF16:
    return 1.6e-2;
  case DType::F32:
    return 1e-6;
  default:
    return 1e-12;
  }
}

const DType kFloatTypes[] = {DType::F32, DType::F16, DType::BF16};

/// Runs a (v, dy) -> dx kernel in `dtype` on values first rounded to
/// `dtype`, and in float64 on the same values; both results must agree.
void expectMatchesF64(KernelFn fn, llvm::StringRef op, const AttributeList &a,
                      const V &v, const V &dy, DType dtype) {
  std::vector<int64_t> shape = {static_cast<int64_t>(v.size())};
  V vr = rounded(dtype, v), dyr = rounded(dtype, dy);
  OwnedTensor v64 = tensorOf(DType::F64, shape, vr),
              g64 = tensorOf(DType::F64, shape, dyr);
  OwnedTensor dx64(DType::F64, shape);
  ASSERT_EQ(errorText(runKernel(fn, op, a, {&v64, &g64}, {&dx64})), "");
  OwnedTensor vt = tensorOf(dtype, shape, vr), gt = tensorOf(dtype, shape, dyr);
  OwnedTensor dxt(dtype, shape);
  ASSERT_EQ(errorText(runKernel(fn, op, a, {&vt, &gt}, {&dxt})), "");
  V want = valuesOf(dx64), got = valuesOf(dxt);
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i], want[i],
                toleranceOf(dtype) * std::max(1.0, std::fabs(want[i])))
        << op.str() << " " << dtypeName(dtype).str() << " at " << i;
}

struct ElementwiseCase {
  KernelFn fn;
  const char *op;
  AttributeList attrs;
  double low, high;
};

} // namespace

TEST(ActivationGradKernels, NarrowTypesMatchFloat64) {
  ElementwiseCase cases[] = {
      {runReluGrad, "ReluGrad", {}, -2, 2},
      {runLeakyReluGrad, "LeakyReluGrad", attrs({floatAttr("alpha", 0.2)}), -2,
       2},
      {runGeluGrad, "GeluGrad", {}, -4, 4},
      {runGeluGrad, "GeluGrad", attrs({stringAttr("approximate", "tanh")}), -4,
       4},
      {runSigmoidGrad, "SigmoidGrad", {}, 0, 1},
      {runTanhGrad, "TanhGrad", {}, -1, 1},
      {runErfGrad, "ErfGrad", {}, -3, 3},
  };
  // Long enough to be split over threads.
  const int64_t n = 40000;
  for (const ElementwiseCase &c : cases) {
    V v = randomValues(n, c.low, c.high, 1), dy = randomValues(n, -1, 1, 2);
    for (DType t : kFloatTypes)
      expectMatchesF64(c.fn, c.op, c.attrs, v, dy, t);
  }
}

TEST(ActivationGradKernels, GeluGradIsTheDerivativeOfGelu) {
  V x = randomValues(64, -4, 4, 3);
  std::vector<int64_t> shape = {64};
  for (const char *approx : {"none", "tanh"}) {
    AttributeList a = attrs({stringAttr("approximate", approx)});
    const double h = 1e-6;
    auto gelu = [&](double shift) {
      V xs = x;
      for (double &v : xs)
        v += shift;
      OwnedTensor in = tensorOf(DType::F64, shape, xs), out(DType::F64, shape);
      EXPECT_EQ(errorText(runKernel(runGelu, "Gelu", a, {&in}, {&out})), "");
      return valuesOf(out);
    };
    V plus = gelu(h), minus = gelu(-h);
    OwnedTensor in = tensorOf(DType::F64, shape, x);
    OwnedTensor ones = tensorOf(DType::F64, shape, V(64, 1.0)),
                dx(DType::F64, shape);
    ASSERT_EQ(
        errorText(runKernel(runGeluGrad, "GeluGrad", a, {&in, &ones}, {&dx})),
        "");
    V got = valuesOf(dx);
    for (size_t i = 0; i < x.size(); ++i)
      EXPECT_NEAR(got[i], (plus[i] - minus[i]) / (2 * h), 1e-7)
          << approx << " at x = " << x[i];
  }
}

TEST(ActivationGradKernels, ReluGradIsZeroAtZero) {
  // PyTorch's convention; LeakyRelu takes the slope there.
  OwnedTensor x = OwnedTensor::f32({3}, {-1, 0, 1}),
              dy = OwnedTensor::f32({3}, {5, 5, 5});
  OwnedTensor dx(DType::F32, {3});
  ASSERT_EQ(errorText(runKernel(runReluGrad, "ReluGrad", {}, {&x, &dy}, {&dx})),
            "");
  EXPECT_EQ(dx.f32s(), (V{0, 0, 5}));
  ASSERT_EQ(
      errorText(runKernel(runLeakyReluGrad, "LeakyReluGrad",
                          attrs({floatAttr("alpha", 0.5)}), {&x, &dy}, {&dx})),
      "");
  EXPECT_EQ(dx.f32s(), (V{2.5, 2.5, 5}));
}

TEST(ActivationGradKernels, ClipGradIsZeroAtTheBounds) {
  // PyTorch's hardtanh_backward (nn.ReLU6): dy strictly inside (min, max).
  OwnedTensor x = OwnedTensor::f32({5}, {-1, 0, 3, 6, 7}),
              dy = OwnedTensor::f32({5}, {5, 5, 5, 5, 5});
  OwnedTensor lo = OwnedTensor::f32({}, {0}), hi = OwnedTensor::f32({}, {6});
  OwnedTensor dx(DType::F32, {5});
  ASSERT_EQ(errorText(runKernel(runClipGrad, "ClipGrad", {},
                                {&x, &dy, &lo, &hi}, {&dx})),
            "");
  EXPECT_EQ(dx.f32s(), (V{0, 0, 5, 0, 0}));
  // An absent bound is unbounded.
  ASSERT_EQ(errorText(runKernel(runClipGrad, "ClipGrad", {},
                                {&x, &dy, nullptr, &hi}, {&dx})),
            "");
  EXPECT_EQ(dx.f32s(), (V{5, 5, 5, 0, 0}));
  ASSERT_EQ(errorText(runKernel(runClipGrad, "ClipGrad", {}, {&x, &dy}, {&dx})),
            "");
  EXPECT_EQ(dx.f32s(), (V{5, 5, 5, 5, 5}));
  OwnedTensor two = OwnedTensor::f32({2}, {0, 1});
  EXPECT_EQ(
      errorText(runKernel(runClipGrad, "ClipGrad", {}, {&x, &dy, &two}, {&dx})),
      "ClipGrad: min must be a scalar of type f32, has type f32 and "
      "shape [2]");
}

TEST(ActivationGradKernels, ClipGradNarrowTypesMatchFloat64) {
  // The bounds are rounded to each type as the forward's Constants would be.
  V v = randomValues(40000, -2, 2, 4), dy = randomValues(40000, -1, 1, 5);
  for (DType t : kFloatTypes) {
    std::vector<int64_t> shape = {static_cast<int64_t>(v.size())};
    V vr = rounded(t, v), dyr = rounded(t, dy);
    OwnedTensor lo = tensorOf(t, {}, {-0.5}), hi = tensorOf(t, {}, {1.25});
    OwnedTensor vt = tensorOf(t, shape, vr), gt = tensorOf(t, shape, dyr);
    OwnedTensor dxt(t, shape);
    ASSERT_EQ(errorText(runKernel(runClipGrad, "ClipGrad", {},
                                  {&vt, &gt, &lo, &hi}, {&dxt})),
              "");
    V got = valuesOf(dxt);
    for (size_t i = 0; i < vr.size(); ++i)
      ASSERT_EQ(got[i], vr[i] > -0.5 && vr[i] < 1.25 ? dyr[i] : 0.0)
          << dtypeName(t).str() << " at " << i;
  }
}

TEST(ActivationGradKernels, Diagnostics) {
  OwnedTensor x = OwnedTensor::f32({3}, {1, 2, 3}),
              dy = OwnedTensor::f32({2}, {1, 2});
  OwnedTensor dx(DType::F32, {3});
  EXPECT_EQ(errorText(runKernel(runTanhGrad, "TanhGrad", {}, {&x, &dy}, {&dx})),
            "TanhGrad: shapes [3] and [2] differ");
  OwnedTensor i = OwnedTensor::i64({3}, {1, 2, 3}), di(DType::I64, {3});
  EXPECT_EQ(errorText(runKernel(runTanhGrad, "TanhGrad", {}, {&i, &i}, {&di})),
            "unsupported: TanhGrad with element type i64");
  OwnedTensor x3 = OwnedTensor::f32({3}, {1, 2, 3});
  EXPECT_EQ(errorText(runKernel(runGeluGrad, "GeluGrad",
                                attrs({stringAttr("approximate", "fast")}),
                                {&x, &x3}, {&dx})),
            "unsupported: GeluGrad with approximate=\"fast\"");
}

TEST(DataMovementGradKernels, SliceGradNegativeStepsEveryType) {
  // x[4:0:-2, 1:] of a [5,3]: rows 4, 2 and columns 1, 2.
  OwnedTensor st = OwnedTensor::ints({2}, {4, 1}),
              en = OwnedTensor::ints({2}, {0, 9});
  OwnedTensor ax = OwnedTensor::ints({2}, {0, -1}),
              sp = OwnedTensor::ints({2}, {-2, 1});
  AttributeList a = attrs({intsAttr("shape", {5, 3})});
  for (DType t : {DType::F64, DType::F32, DType::F16, DType::BF16}) {
    OwnedTensor dy = tensorOf(t, {2, 2}, {1, 2, 3, 4});
    OwnedTensor dx = tensorOf(t, {5, 3}, V(15, 7.0)); // stale values must go
    ASSERT_EQ(errorText(runKernel(runSliceGrad, "SliceGrad", a,
                                  {&dy, &st, &en, &ax, &sp}, {&dx})),
              "");
    EXPECT_EQ(valuesOf(dx), (V{0, 0, 0, 0, 0, 0, 0, 3, 4, 0, 0, 0, 0, 1, 2}))
        << dtypeName(t).str();
  }
  OwnedTensor dy = OwnedTensor::f32({3, 2}, V(6, 1.0)), dx(DType::F32, {5, 3});
  EXPECT_EQ(errorText(runKernel(runSliceGrad, "SliceGrad", a,
                                {&dy, &st, &en, &ax, &sp}, {&dx})),
            "SliceGrad: dy has shape [3,2], expected [2,2]");
}

TEST(DataMovementGradKernels, GatherGradSumsRepeatsOnceRounded) {
  // 299 copies of 1/3 + 1/1024 into one row: adding them one by one in
  // bfloat16 or float16 would round at every step and drift from the sum;
  // the kernel rounds a double sum once.
  const int64_t count = 300;
  std::vector<int64_t> ids(count, -2);
  ids[7] = 0;
  OwnedTensor idx = OwnedTensor::ints({count}, ids);
  AttributeList a = attrs({intAttr("axis", 0), intsAttr("shape", {3, 2})});
  double piece = 1.0 / 3 + 1.0 / 1024;
  for (DType t : {DType::F64, DType::F32, DType::F16, DType::BF16}) {
    OwnedTensor dy = tensorOf(t, {count, 2}, V(count * 2, piece));
    OwnedTensor dx(t, {3, 2});
    ASSERT_EQ(errorText(runKernel(runGatherGrad, "GatherGrad", a, {&idx, &dy},
                                  {&dx})),
              "");
    double p = rounded(t, {piece})[0];
    V want = rounded(t, {p, p, (count - 1) * p, (count - 1) * p, 0, 0});
    V got = valuesOf(dx);
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_NEAR(got[i], want[i], 1e-12 * std::fabs(want[i]))
          << dtypeName(t).str() << " at " << i;
  }
  OwnedTensor bad = OwnedTensor::ints({1}, {3}),
              dy = OwnedTensor::f32({1, 2}, {1, 1});
  OwnedTensor dx(DType::F32, {3, 2});
  EXPECT_EQ(
      errorText(runKernel(runGatherGrad, "GatherGrad", a, {&bad, &dy}, {&dx})),
      "GatherGrad: index 3 at position 0 is out of range for axis 0 of size 3");
}

TEST(DataMovementGradKernels, ReduceMaxGradSplitsTies) {
  OwnedTensor x = OwnedTensor::f32({2, 3}, {1, 3, 3, 5, 2, 5});
  OwnedTensor y = OwnedTensor::f32({2, 1}, {3, 5}),
              dy = OwnedTensor::f32({2, 1}, {1, 4});
  OwnedTensor dx(DType::F32, {2, 3});
  ASSERT_EQ(errorText(runKernel(runReduceMaxGrad, "ReduceMaxGrad", {},
                                {&x, &y, &dy}, {&dx})),
            "");
  EXPECT_EQ(dx.f32s(), (V{0, 0.5, 0.5, 2, 0, 2}));
  OwnedTensor y2 = OwnedTensor::f32({3}, {1, 1, 1});
  EXPECT_EQ(errorText(runKernel(runReduceMaxGrad, "ReduceMaxGrad", {},
                                {&x, &y2, &y2}, {&dx})),
            "ReduceMaxGrad: y has shape [3], not x's [2,3] with reduced axes "
            "of size 1");
}
