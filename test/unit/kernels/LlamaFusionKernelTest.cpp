//===- LlamaFusionKernelTest.cpp - zinc.Rotary and zinc.SwiGlu kernels ----===//
//
// The cpu kernels of fuse-rotary's and fuse-swiglu's ops: Rotary against
// the exported formula written out (Slices, Neg, Concat, Muls, Add) with the
// tables broadcast three ways, RotaryGrad as Rotary's transpose (a linear
// map in x), SwiGlu against silu(g) u and SwiGluGrad against a finite
// difference of SwiGlu, in float64; float32 against PyTorch's rounding of
// the unfused ops; and the kernels' refusals.
//
//===----------------------------------------------------------------------===//
#include "test/unit/kernels/KernelCallHelpers.h"
#include <cmath>
#include <gtest/gtest.h>

using namespace zinc;
using namespace zinc::cpu;
using namespace zinc::cpu::test;

namespace {

using V = std::vector<double>;
using Shape = std::vector<int64_t>;

OwnedTensor f64(const Shape &shape, const V &v) {
  return OwnedTensor::of<double>(DType::F64, shape, v);
}

/// Element `i` of a table of shape `table` broadcast to `x`.
double tableAt(const V &t, const Shape &table, const Shape &x, int64_t i) {
  int64_t off = 0, stride = 1;
  for (size_t k = x.size(); k-- > 0;) {
    int64_t idx = i % x[k];
    i /= x[k];
    size_t back = x.size() - 1 - k;
    if (back < table.size()) {
      int64_t dim = table[table.size() - 1 - back];
      if (dim != 1)
        off += idx * stride;
      stride *= dim;
    }
  }
  return t[off];
}

/// x * cos + Concat(-x2, x1) * sin, element by element, as the exported
/// graph computes it.
V unfusedRotary(const V &x, const V &c, const V &s, const Shape &xs,
                const Shape &ts) {
  int64_t d = xs.back(), h = d / 2;
  V y(x.size());
  for (int64_t i = 0; i < int64_t(x.size()); ++i) {
    int64_t col = i % d;
    double rot = col < h ? -x[i + h] : x[i - h];
    y[i] = x[i] * tableAt(c, ts, xs, i) + rot * tableAt(s, ts, xs, i);
  }
  return y;
}

V rotary(const V &x, const V &c, const V &s, const Shape &xs, const Shape &ts,
         bool grad = false) {
  OwnedTensor tx = f64(xs, x), tc = f64(ts, c), tsin = f64(ts, s),
              y(DType::F64, xs);
  EXPECT_EQ(errorText(runKernel(grad ? runRotaryGrad : runRotary,
                                grad ? "RotaryGrad" : "Rotary", {},
                                {&tx, &tc, &tsin}, {&y})),
            "");
  return y.values<double>();
}

int64_t count(const Shape &s) {
  int64_t n = 1;
  for (int64_t d : s)
    n *= d;
  return n;
}

} // namespace

TEST(RotaryKernel, MatchesTheExportedFormula) {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{2, 3, 4, 8}, {1, 1, 4, 8}}, // Llama's [1, 1, T, D]
      {{2, 3, 4, 8}, {2, 1, 4, 8}}, // one table per batch row
      {{3, 4}, {3, 1}},             // broadcast along the last axis
      {{5, 6}, {}}};                // scalars
  for (auto &[xs, ts] : cases) {
    V x = randomValues(count(xs), -2, 2, 1),
      c = randomValues(count(ts), -1, 1, 2),
      s = randomValues(count(ts), -1, 1, 3);
    V got = rotary(x, c, s, xs, ts), want = unfusedRotary(x, c, s, xs, ts);
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 1e-15) << "x " << xs.size() << "-d at " << i;
  }
}

TEST(RotaryKernel, GradIsTheTransposeOfRotary) {
  // y = A x with A fixed by the tables: <dy, A x> = <A^T dy, x> for every
  // x and dy, which RotaryGrad = A^T must satisfy elementwise; checked on
  // the unit vectors' worth of random pairs.
  Shape xs = {2, 3, 6}, ts = {3, 6};
  V c = randomValues(count(ts), -1, 1, 4),
    s = randomValues(count(ts), -1, 1, 5);
  for (unsigned seed = 0; seed < 4; ++seed) {
    V x = randomValues(count(xs), -1, 1, 10 + seed),
      dy = randomValues(count(xs), -1, 1, 20 + seed);
    V ax = rotary(x, c, s, xs, ts), atdy = rotary(dy, c, s, xs, ts, true);
    double lhs = 0, rhs = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      lhs += dy[i] * ax[i];
      rhs += atdy[i] * x[i];
    }
    EXPECT_NEAR(lhs, rhs, 1e-12) << "seed " << seed;
  }
  // And element by element: column j of A is Rotary of the unit vector e_j.
  for (int64_t j = 0; j < count(xs); ++j) {
    V e(count(xs), 0.0);
    e[j] = 1;
    V column = rotary(e, c, s, xs, ts);
    V dy = randomValues(count(xs), -1, 1, 30);
    double want = 0;
    for (size_t i = 0; i < column.size(); ++i)
      want += column[i] * dy[i];
    EXPECT_NEAR(rotary(dy, c, s, xs, ts, true)[j], want, 1e-14)
        << "x[" << j << "]";
  }
}

TEST(RotaryKernel, Float32RoundsAsTheUnfusedOps) {
  // PyTorch rounds x cos, rotate_half(x) sin and their sum to float each;
  // the kernel does the same, so the results are equal bit for bit.
  Shape xs = {2, 2, 3, 8}, ts = {1, 1, 3, 8};
  V x = randomValues(count(xs), -3, 3, 6),
    c = randomValues(count(ts), -1, 1, 7),
    s = randomValues(count(ts), -1, 1, 8);
  OwnedTensor tx = OwnedTensor::f32(xs, x), tc = OwnedTensor::f32(ts, c),
              tsin = OwnedTensor::f32(ts, s), y(DType::F32, xs);
  ASSERT_EQ(
      errorText(runKernel(runRotary, "Rotary", {}, {&tx, &tc, &tsin}, {&y})),
      "");
  V xf = tx.f32s(), cf = tc.f32s(), sf = tsin.f32s(), got = y.f32s();
  int64_t d = xs.back(), h = d / 2;
  for (int64_t i = 0; i < count(xs); ++i) {
    int64_t col = i % d;
    float rot = col < h ? -float(xf[i + h]) : float(xf[i - h]);
    volatile float a = float(xf[i]) * float(tableAt(cf, ts, xs, i));
    volatile float b = rot * float(tableAt(sf, ts, xs, i));
    ASSERT_EQ(float(got[i]), float(a + b)) << "at " << i;
  }
}

TEST(RotaryKernel, Refusals) {
  auto refusal = [](const Shape &xs, const Shape &ts, const Shape &sinShape) {
    OwnedTensor x(DType::F32, xs), c(DType::F32, ts), s(DType::F32, sinShape),
        y(DType::F32, xs);
    return errorText(runKernel(runRotary, "Rotary", {}, {&x, &c, &s}, {&y}));
  };
  EXPECT_EQ(refusal({2, 5}, {5}, {5}), "Rotary: the last axis of [2,5] is odd");
  EXPECT_EQ(refusal({2, 4}, {3, 4}, {3, 4}),
            "Rotary: tables of shape [3,4] do not broadcast to [2,4]");
  EXPECT_EQ(refusal({2, 4}, {4}, {1, 4}),
            "Rotary: cos and sin differ from each other or from input 0 in "
            "type or shape");
}

TEST(SwiGluKernel, ForwardAndGradient) {
  const int64_t n = 40000; // long enough to be split over threads
  Shape shape = {n};
  V g = randomValues(n, -8, 8, 1), u = randomValues(n, -2, 2, 2),
    dy = randomValues(n, -1, 1, 3);
  OwnedTensor tg = f64(shape, g), tu = f64(shape, u), tdy = f64(shape, dy),
              y(DType::F64, shape), dg(DType::F64, shape),
              du(DType::F64, shape);
  ASSERT_EQ(errorText(runKernel(runSwiGlu, "SwiGlu", {}, {&tg, &tu}, {&y})),
            "");
  ASSERT_EQ(errorText(runKernel(runSwiGluGrad, "SwiGluGrad", {},
                                {&tg, &tu, &tdy}, {&dg, &du})),
            "");
  V got = y.values<double>(), gotDg = dg.values<double>(),
    gotDu = du.values<double>();
  const double h = 1e-6;
  auto swiglu = [](double g, double u) { return g / (1 + std::exp(-g)) * u; };
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_NEAR(got[i], swiglu(g[i], u[i]), 1e-15 * (1 + std::fabs(got[i])));
    double fdG = (swiglu(g[i] + h, u[i]) - swiglu(g[i] - h, u[i])) / (2 * h);
    double fdU = (swiglu(g[i], u[i] + h) - swiglu(g[i], u[i] - h)) / (2 * h);
    ASSERT_NEAR(gotDg[i], dy[i] * fdG, 1e-8) << "dgate at " << i;
    ASSERT_NEAR(gotDu[i], dy[i] * fdU, 1e-8) << "dup at " << i;
  }
}

TEST(SwiGluKernel, Float32MatchesFloat64) {
  // f32 takes RowMath's vectorised exp; within a few float ulps of the
  // float64 results on the same (rounded) inputs, across chunk boundaries
  // and threads.
  const int64_t n = 40001;
  Shape shape = {n};
  V g = randomValues(n, -12, 12, 4), u = randomValues(n, -2, 2, 5),
    dy = randomValues(n, -1, 1, 6);
  OwnedTensor g32 = OwnedTensor::f32(shape, g),
              u32 = OwnedTensor::f32(shape, u),
              dy32 = OwnedTensor::f32(shape, dy);
  OwnedTensor g64 = f64(shape, g32.f32s()), u64 = f64(shape, u32.f32s()),
              dy64 = f64(shape, dy32.f32s());
  OwnedTensor y32(DType::F32, shape), y64(DType::F64, shape),
      dg32(DType::F32, shape), du32(DType::F32, shape), dg64(DType::F64, shape),
      du64(DType::F64, shape);
  ASSERT_EQ(errorText(runKernel(runSwiGlu, "SwiGlu", {}, {&g32, &u32}, {&y32})),
            "");
  ASSERT_EQ(errorText(runKernel(runSwiGlu, "SwiGlu", {}, {&g64, &u64}, {&y64})),
            "");
  ASSERT_EQ(errorText(runKernel(runSwiGluGrad, "SwiGluGrad", {},
                                {&g32, &u32, &dy32}, {&dg32, &du32})),
            "");
  ASSERT_EQ(errorText(runKernel(runSwiGluGrad, "SwiGluGrad", {},
                                {&g64, &u64, &dy64}, {&dg64, &du64})),
            "");
  const std::pair<const OwnedTensor *, const OwnedTensor *> pairs[] = {
      {&y32, &y64}, {&dg32, &dg64}, {&du32, &du64}};
  for (auto [got32, want64] : pairs) {
    V got = got32->f32s(), want = want64->values<double>();
    for (int64_t i = 0; i < n; ++i)
      ASSERT_NEAR(got[i], want[i], 1e-6 * (1 + std::fabs(want[i])))
          << "at " << i;
  }
}

TEST(SwiGluKernel, Refusals) {
  OwnedTensor g(DType::F32, {2, 3}), u(DType::F32, {3}), y(DType::F32, {2, 3}),
      i(DType::I64, {2, 3}), iy(DType::I64, {2, 3});
  EXPECT_EQ(
      errorText(runKernel(runSwiGlu, "SwiGlu", {}, {&g, &u}, {&y})),
      "SwiGlu: input 1 is missing or differs from input 0 in type or shape");
  EXPECT_EQ(errorText(runKernel(runSwiGlu, "SwiGlu", {}, {&i, &i}, {&iy})),
            "unsupported: SwiGlu with element type i64");
  EXPECT_EQ(errorText(runKernel(runSwiGluGrad, "SwiGluGrad", {}, {&g, &g, &g},
                                {&y, nullptr})),
            "SwiGluGrad: output 1 is missing or differs from input 0 in type "
            "or shape");
}
