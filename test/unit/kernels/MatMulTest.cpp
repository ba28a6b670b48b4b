//===- MatMulTest.cpp - MatMul (numpy semantics) and Gemm kernels ---------===//
#include "test/unit/kernels/KernelCallHelpers.h"
#include <cmath>
#include <gtest/gtest.h>

using namespace zinc;
using namespace zinc::cpu;
using namespace zinc::cpu::test;

namespace {

using V = std::vector<double>;

V ramp(int64_t n, int salt = 0) {
  V v(n);
  for (int64_t i = 0; i < n; ++i)
    v[i] = ((i * 5 + salt) % 9) - 4;
  return v;
}

/// numpy.matmul in double, through explicit 1-D promotion and broadcasting.
V naiveMatMul(const V &a, std::vector<int64_t> as, const V &b,
              std::vector<int64_t> bs) {
  if (as.size() == 1)
    as.insert(as.begin(), 1);
  if (bs.size() == 1)
    bs.push_back(1);
  int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  std::vector<int64_t> ba(as.begin(), as.end() - 2),
      bb(bs.begin(), bs.end() - 2);
  auto batch = cantFail(broadcastShapes(ba, bb));
  llvm::SmallVector<int64_t, 6> sa = broadcastStrides(ba, batch),
                                sb = broadcastStrides(bb, batch);
  int64_t count = numElements(batch);
  V y(count * m * n, 0);
  for (int64_t t = 0; t < count; ++t) {
    int64_t rem = t, oa = 0, ob = 0;
    for (size_t d = batch.size(); d-- > 0;) {
      oa += (rem % batch[d]) * sa[d];
      ob += (rem % batch[d]) * sb[d];
      rem /= batch[d];
    }
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        for (int64_t p = 0; p < k; ++p)
          y[(t * m + i) * n + j] +=
              a[oa * m * k + i * k + p] * b[ob * k * n + p * n + j];
  }
  return y;
}

// 1-D operands, a shared right-hand matrix (folded into one GEMM), a
// batched right operand with a 2-D left one, and batch broadcasting.
TEST(MatMulKernel, NumpyShapes) {
  struct Case {
    std::vector<int64_t> a, b, y;
  } cases[] = {{{4}, {4, 3}, {3}},
               {{3, 4}, {4}, {3}},
               {{4}, {4}, {}},
               {{2, 3, 4}, {4, 5}, {2, 3, 5}},
               {{3, 4}, {2, 4, 5}, {2, 3, 5}},
               {{2, 1, 3, 4}, {3, 4, 5}, {2, 3, 3, 5}},
               {{1, 2, 3, 4}, {1, 2, 4, 3}, {1, 2, 3, 3}},
               {{4}, {2, 4, 3}, {2, 3}}};
  for (const Case &c : cases) {
    V av = ramp(numElements(c.a)), bv = ramp(numElements(c.b), 3);
    V expect = naiveMatMul(av, c.a, bv, c.b);
    OwnedTensor a = OwnedTensor::f32(c.a, av), b = OwnedTensor::f32(c.b, bv);
    OwnedTensor y(DType::F32, c.y);
    ASSERT_EQ(
        errorText(runKernel(runMatMul, "MatMul", attrs({}), {&a, &b}, {&y})),
        "")
        << formatShape(c.a) << " x " << formatShape(c.b);
    EXPECT_EQ(y.f32s(), expect)
        << formatShape(c.a) << " x " << formatShape(c.b);
    OwnedTensor ad = OwnedTensor::of<double>(DType::F64, c.a, av);
    OwnedTensor bd = OwnedTensor::of<double>(DType::F64, c.b, bv);
    OwnedTensor yd(DType::F64, c.y);
    ASSERT_EQ(
        errorText(runKernel(runMatMul, "MatMul", attrs({}), {&ad, &bd}, {&yd})),
        "");
    EXPECT_EQ(yd.values<double>(), expect);
  }
}

// Integers multiply exactly in their own type and wrap; f16/bf16 are
// multiplied in float and rounded once.
TEST(MatMulKernel, IntegerAndSixteenBit) {
  V av = ramp(6), bv = ramp(6, 1);
  V expect = naiveMatMul(av, {2, 3}, bv, {3, 2});
  OwnedTensor a = OwnedTensor::of<int32_t>(DType::I32, {2, 3}, av);
  OwnedTensor b = OwnedTensor::of<int32_t>(DType::I32, {3, 2}, bv);
  OwnedTensor y(DType::I32, {2, 2});
  ASSERT_EQ(
      errorText(runKernel(runMatMul, "MatMul", attrs({}), {&a, &b}, {&y})), "");
  EXPECT_EQ(y.values<int32_t>(), expect);

  OwnedTensor u = OwnedTensor::of<uint8_t>(DType::U8, {1, 2}, {16, 16});
  OwnedTensor w = OwnedTensor::of<uint8_t>(DType::U8, {2, 1}, {8, 1});
  OwnedTensor uy(DType::U8, {1, 1});
  ASSERT_EQ(
      errorText(runKernel(runMatMul, "MatMul", attrs({}), {&u, &w}, {&uy})),
      "");
  EXPECT_EQ(uy.values<uint8_t>(), V({144})); // 144 = 128 + 16, no wrap
  OwnedTensor w2 = OwnedTensor::of<uint8_t>(DType::U8, {2, 1}, {16, 1});
  ASSERT_EQ(
      errorText(runKernel(runMatMul, "MatMul", attrs({}), {&u, &w2}, {&uy})),
      "");
  EXPECT_EQ(uy.values<uint8_t>(), V({16})); // 272 wraps to 16

  // 1 + 2^-11 + 2^-11 is exact in float and rounds to 1 + 2^-10 in f16,
  // while f16 accumulation would round each partial sum to 1.
  double e = std::ldexp(1.0, -11);
  OwnedTensor h = OwnedTensor::of<Half>(DType::F16, {1, 3}, {1, e, e});
  OwnedTensor ones = OwnedTensor::of<Half>(DType::F16, {3, 1}, {1, 1, 1});
  OwnedTensor hy(DType::F16, {1, 1});
  ASSERT_EQ(
      errorText(runKernel(runMatMul, "MatMul", attrs({}), {&h, &ones}, {&hy})),
      "");
  EXPECT_EQ(hy.values<Half>(), V({1 + 2 * e}));
  OwnedTensor bh = OwnedTensor::of<BFloat16>(DType::BF16, {2, 3, 2}, ramp(12));
  OwnedTensor bw = OwnedTensor::of<BFloat16>(DType::BF16, {2, 2}, ramp(4, 2));
  OwnedTensor by(DType::BF16, {2, 3, 2});
  ASSERT_EQ(
      errorText(runKernel(runMatMul, "MatMul", attrs({}), {&bh, &bw}, {&by})),
      "");
  EXPECT_EQ(by.values<BFloat16>(),
            naiveMatMul(ramp(12), {2, 3, 2}, ramp(4, 2), {2, 2}));
}

TEST(MatMulKernel, EmptyInnerAndErrors) {
  OwnedTensor a(DType::F32, {2, 0}), b(DType::F32, {0, 3});
  OwnedTensor y = OwnedTensor::f32({2, 3}, V(6, 7));
  ASSERT_EQ(
      errorText(runKernel(runMatMul, "MatMul", attrs({}), {&a, &b}, {&y})), "");
  EXPECT_EQ(y.f32s(), V(6, 0));
  OwnedTensor c = OwnedTensor::f32({2, 3}, ramp(6)),
              d = OwnedTensor::f32({2, 3}, ramp(6));
  OwnedTensor z(DType::F32, {2, 3});
  EXPECT_EQ(
      errorText(runKernel(runMatMul, "MatMul", attrs({}), {&c, &d}, {&z})),
      "MatMul: shapes [2,3] and [2,3] do not multiply");
  OwnedTensor e = OwnedTensor::f32({3, 2}, ramp(6));
  EXPECT_EQ(
      errorText(runKernel(runMatMul, "MatMul", attrs({}), {&c, &e}, {&z})),
      "MatMul: output shape [2,3], expected [2,2]");
}

/// Gemm in double: alpha * op(A) op(B) + beta * C with C read through
/// numpy broadcasting to [M, N].
V naiveGemm(const V &a, const V &b, const V &c, std::vector<int64_t> cs,
            int64_t m, int64_t n, int64_t k, bool ta, bool tb, double alpha,
            double beta) {
  V cb = c.empty() ? V() : V(m * n);
  if (!c.empty()) {
    llvm::SmallVector<int64_t, 6> s = broadcastStrides(cs, {m, n});
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        cb[i * n + j] = c[i * s[0] + j * s[1]];
  }
  V y(m * n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p)
        acc += (ta ? a[p * m + i] : a[i * k + p]) *
               (tb ? b[j * k + p] : b[p * n + j]);
      y[i * n + j] = alpha * acc + (c.empty() ? 0 : beta * cb[i * n + j]);
    }
  return y;
}

// Every transpose combination and every C shape Gemm allows.
TEST(GemmKernel, TransposesAndBiasShapes) {
  int64_t m = 3, n = 4, k = 5;
  V av = ramp(m * k), bv = ramp(k * n, 2);
  std::vector<std::vector<int64_t>> cShapes = {{}, {n}, {1, n}, {m, 1}, {m, n}};
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (size_t ci = 0; ci <= cShapes.size(); ++ci) {
        bool hasC = ci < cShapes.size();
        std::vector<int64_t> cs = hasC ? cShapes[ci] : std::vector<int64_t>();
        V cv = hasC ? ramp(numElements(cs), 4) : V();
        std::vector<int64_t> ash =
            ta ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k};
        std::vector<int64_t> bsh =
            tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n};
        OwnedTensor a = OwnedTensor::f32(ash, av),
                    b = OwnedTensor::f32(bsh, bv);
        OwnedTensor c = OwnedTensor::f32(cs, cv);
        OwnedTensor y(DType::F32, {m, n});
        AttributeList at =
            attrs({intAttr("transA", ta), intAttr("transB", tb),
                   floatAttr("alpha", 0.5), floatAttr("beta", 2)});
        ASSERT_EQ(errorText(runKernel(runGemm, "Gemm", at,
                                      {&a, &b, hasC ? &c : nullptr}, {&y})),
                  "");
        EXPECT_EQ(y.f32s(), naiveGemm(av, bv, cv, cs, m, n, k, ta, tb, 0.5, 2))
            << "transA " << ta << " transB " << tb << " C " << formatShape(cs);
      }
}

TEST(GemmKernel, OtherTypesAndErrors) {
  V av = ramp(6), bv = ramp(6, 1), cv = {100, -100};
  V expect = naiveGemm(av, bv, cv, {2}, 2, 2, 3, false, false, 1, 1);
  OwnedTensor a = OwnedTensor::of<int64_t>(DType::I64, {2, 3}, av);
  OwnedTensor b = OwnedTensor::of<int64_t>(DType::I64, {3, 2}, bv);
  OwnedTensor c = OwnedTensor::of<int64_t>(DType::I64, {2}, cv);
  OwnedTensor y(DType::I64, {2, 2});
  ASSERT_EQ(
      errorText(runKernel(runGemm, "Gemm", attrs({}), {&a, &b, &c}, {&y})), "");
  EXPECT_EQ(y.i64s(), expect);

  OwnedTensor h = OwnedTensor::of<Half>(DType::F16, {2, 3}, av);
  OwnedTensor hb = OwnedTensor::of<Half>(DType::F16, {3, 2}, bv);
  OwnedTensor hc = OwnedTensor::of<Half>(DType::F16, {2}, cv);
  OwnedTensor hy(DType::F16, {2, 2});
  AttributeList beta = attrs({floatAttr("beta", 0.25)});
  ASSERT_EQ(errorText(runKernel(runGemm, "Gemm", beta, {&h, &hb, &hc}, {&hy})),
            "");
  EXPECT_EQ(hy.values<Half>(),
            naiveGemm(av, bv, cv, {2}, 2, 2, 3, false, false, 1, 0.25));

  OwnedTensor bad = OwnedTensor::f32({3}, {1, 2, 3});
  OwnedTensor fa = OwnedTensor::f32({2, 3}, av),
              fb = OwnedTensor::f32({3, 2}, bv);
  OwnedTensor fy(DType::F32, {2, 2});
  EXPECT_EQ(
      errorText(runKernel(runGemm, "Gemm", attrs({}), {&fa, &fb, &bad}, {&fy})),
      "Gemm: C of shape [3] does not broadcast to [2,2]");
  EXPECT_EQ(errorText(runKernel(runGemm, "Gemm", attrs({intAttr("transA", 1)}),
                                {&fa, &fb}, {&fy})),
            "Gemm: inner dimensions 2 and 3 differ");
}

/// `v` of shape `s` with its last two axes swapped (the layout a transposed
/// operand is stored in).
V swapLastTwo(const V &v, const std::vector<int64_t> &s) {
  int64_t r = s[s.size() - 2], c = s.back(), mats = numElements(s) / (r * c);
  V out(v.size());
  for (int64_t t = 0; t < mats; ++t)
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < c; ++j)
        out[t * r * c + j * r + i] = v[t * r * c + i * c + j];
  return out;
}

// FusedMatMul reads a transposed operand from its stored layout and scales
// by alpha: the same numbers as MatMul on the transposed values, for the
// folded linear-layer shape, batched heads and a broadcast batch.
TEST(FusedMatMulKernel, TransposedOperandsAndAlpha) {
  struct Case {
    std::vector<int64_t> a, b, y;
  } cases[] = {{{2, 3, 4}, {4, 5}, {2, 3, 5}},
               {{2, 3, 4, 6}, {2, 3, 6, 4}, {2, 3, 4, 4}},
               {{3, 4}, {2, 4, 5}, {2, 3, 5}},
               {{4, 3}, {3, 2}, {4, 2}}};
  for (const Case &c : cases)
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) {
        V av = ramp(numElements(c.a)), bv = ramp(numElements(c.b), 3);
        V expect = naiveMatMul(av, c.a, bv, c.b);
        for (double &e : expect)
          e *= 0.5;
        std::vector<int64_t> as = c.a, bs = c.b;
        std::swap(as[as.size() - 1], as[as.size() - 2]);
        std::swap(bs[bs.size() - 1], bs[bs.size() - 2]);
        OwnedTensor a = ta ? OwnedTensor::f32(as, swapLastTwo(av, c.a))
                           : OwnedTensor::f32(c.a, av);
        OwnedTensor b = tb ? OwnedTensor::f32(bs, swapLastTwo(bv, c.b))
                           : OwnedTensor::f32(c.b, bv);
        OwnedTensor y(DType::F32, c.y);
        ASSERT_EQ(errorText(runKernel(
                      runFusedMatMul, "FusedMatMul",
                      attrs({intAttr("transA", ta), intAttr("transB", tb),
                             floatAttr("alpha", 0.5)}),
                      {&a, &b}, {&y})),
                  "")
            << formatShape(c.a) << " x " << formatShape(c.b) << " ta " << ta
            << " tb " << tb;
        EXPECT_EQ(y.f32s(), expect) << formatShape(c.a) << " x "
                                    << formatShape(c.b) << " ta " << ta
                                    << " tb " << tb;
      }
}

TEST(FusedMatMulKernel, ShapesThatDoNotMultiplySaySo) {
  OwnedTensor a = OwnedTensor::f32({3, 4}, ramp(12));
  OwnedTensor b = OwnedTensor::f32({3, 5}, ramp(15));
  OwnedTensor y(DType::F32, {4, 5});
  EXPECT_EQ(errorText(runKernel(runFusedMatMul, "FusedMatMul",
                                attrs({intAttr("transA", 0)}), {&a, &b}, {&y})),
            "FusedMatMul: shapes [3,4] and [3,5] do not multiply");
  EXPECT_EQ(errorText(runKernel(runFusedMatMul, "FusedMatMul",
                                attrs({intAttr("transA", 1)}), {&a, &b}, {&y})),
            "");
  OwnedTensor v = OwnedTensor::f32({4}, ramp(4));
  EXPECT_EQ(errorText(runKernel(runFusedMatMul, "FusedMatMul",
                                attrs({intAttr("transA", 1)}), {&v, &b}, {&y})),
            "FusedMatMul: a transposed operand must have rank >= 2");
}

} // namespace

namespace {

/// A bias along the output's last axis (fuse-bias), with flattened operands
/// (fold-transposes' views of Reshapes), in f32, f64 and bf16, batched and
/// folded; a bias of the wrong length is refused.
TEST(FusedMatMulKernel, BiasAndFlattenedOperands) {
  V av = ramp(2 * 3 * 4), bv = ramp(4 * 5, 3), bias = {1, -2, 3, 0.5, -1};
  V expect = naiveMatMul(av, {6, 4}, bv, {4, 5});
  for (size_t i = 0; i < expect.size(); ++i)
    expect[i] += bias[i % 5];
  for (DType t : {DType::F32, DType::F64, DType::BF16}) {
    auto make = [&](std::vector<int64_t> shape, const V &v) {
      if (t == DType::F32)
        return OwnedTensor::of<float>(t, shape, v);
      if (t == DType::F64)
        return OwnedTensor::of<double>(t, shape, v);
      return OwnedTensor::of<BFloat16>(t, shape, v);
    };
    // A [2,3,4] read as [6,4].
    OwnedTensor a = make({2, 3, 4}, av), b = make({4, 5}, bv),
                c = make({5}, bias);
    OwnedTensor y(t, {6, 5});
    ASSERT_EQ(errorText(runKernel(runFusedMatMul, "FusedMatMul",
                                  attrs({intAttr("flattenA", 1)}), {&a, &b, &c},
                                  {&y})),
              "")
        << dtypeName(t).str();
    V got = t == DType::F32   ? y.values<float>()
            : t == DType::F64 ? y.values<double>()
                              : y.values<BFloat16>();
    for (size_t i = 0; i < expect.size(); ++i)
      EXPECT_NEAR(got[i], expect[i], t == DType::BF16 ? 0.25 : 1e-9)
          << dtypeName(t).str() << " at " << i;
    // Batched: [2,3,4] x [4,5] + bias, not flattened.
    OwnedTensor y3(t, {2, 3, 5});
    ASSERT_EQ(errorText(runKernel(runFusedMatMul, "FusedMatMul", attrs({}),
                                  {&a, &b, &c}, {&y3})),
              "");
  }
  OwnedTensor a = OwnedTensor::f32({6, 4}, av), b = OwnedTensor::f32({4, 5}, bv),
              c = OwnedTensor::f32({4}, {1, 2, 3, 4});
  OwnedTensor y(DType::F32, {6, 5});
  EXPECT_NE(errorText(runKernel(runFusedMatMul, "FusedMatMul", attrs({}),
                                {&a, &b, &c}, {&y}))
                .find("is not a vector along the output's last axis"),
            std::string::npos);
}

} // namespace

namespace {

/// Attention's scores read straight from the fused projection through
/// strided views (fold-transposes' viewA/viewB), against the split,
/// reshaped and transposed heads multiplied by hand; a view whose rows are
/// contiguous (BLAS transposes it); a view past its tensor is refused.
TEST(FusedMatMulKernel, StridedViewsOfTheFusedProjection) {
  const int64_t B = 2, T = 4, H = 2, D = 3, C = H * D;
  V qkv = ramp(B * T * 2 * C, 1);
  for (size_t i = 0; i < qkv.size(); ++i)
    qkv[i] += 0.125 * double(i % 11);
  auto at = [&](int64_t b, int64_t t, int64_t c) { return qkv[(b * T + t) * 2 * C + c]; };
  V expect(B * H * T * T, 0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < T; ++j)
          for (int64_t d = 0; d < D; ++d)
            expect[((b * H + h) * T + i) * T + j] +=
                at(b, i, h * D + d) * at(b, j, C + h * D + d);
  for (DType t : {DType::F32, DType::F64}) {
    OwnedTensor src = t == DType::F32 ? OwnedTensor::of<float>(t, {B, T, 2 * C}, qkv)
                                      : OwnedTensor::of<double>(t, {B, T, 2 * C}, qkv);
    OwnedTensor y(t, {B, H, T, T});
    ASSERT_EQ(errorText(runKernel(
                  runFusedMatMul, "FusedMatMul",
                  attrs({intAttr("transA", 0), intAttr("transB", 1),
                         intsAttr("shapeA", {B, H, T, D}),
                         intsAttr("viewA", {0, T * 2 * C, D, 2 * C, 1}),
                         intsAttr("shapeB", {B, H, T, D}),
                         intsAttr("viewB", {C, T * 2 * C, D, 2 * C, 1})}),
                  {&src, &src}, {&y})),
              "");
    V got = t == DType::F32 ? y.values<float>() : y.values<double>();
    for (size_t i = 0; i < expect.size(); ++i)
      EXPECT_NEAR(got[i], expect[i], 1e-4 * (1 + std::fabs(expect[i]))) << i;
  }
  // k read as k^T stored with contiguous rows: B = view [B,H,D,T] with
  // strides (.., 1, 2C), transB 0; the same scores.
  OwnedTensor src = OwnedTensor::f32({B, T, 2 * C}, qkv);
  OwnedTensor y(DType::F32, {B, H, T, T});
  ASSERT_EQ(errorText(runKernel(
                runFusedMatMul, "FusedMatMul",
                attrs({intsAttr("shapeA", {B, H, T, D}),
                       intsAttr("viewA", {0, T * 2 * C, D, 2 * C, 1}),
                       intsAttr("shapeB", {B, H, D, T}),
                       intsAttr("viewB", {C, T * 2 * C, D, 1, 2 * C})}),
                {&src, &src}, {&y})),
            "");
  V got = y.values<float>();
  for (size_t i = 0; i < expect.size(); ++i)
    EXPECT_NEAR(got[i], expect[i], 1e-4 * (1 + std::fabs(expect[i]))) << i;
  EXPECT_NE(errorText(runKernel(runFusedMatMul, "FusedMatMul",
                                attrs({intAttr("transB", 1),
                                       intsAttr("shapeA", {B, H, T, D}),
                                       intsAttr("viewA", {40, T * 2 * C, D, 2 * C, 1}),
                                       intsAttr("shapeB", {B, H, T, D}),
                                       intsAttr("viewB", {C, T * 2 * C, D, 2 * C, 1})}),
                                {&src, &src}, {&y}))
                .find("reads past its"),
            std::string::npos);
}

} // namespace

namespace {

/// A view with a length-1 axis whose stride BLAS cannot take as a leading
/// dimension: [2,1,3] rows of a [2,3] tensor with strides (3, 1, 1). The
/// kernel picks a leading dimension that fits the matrix.
TEST(FusedMatMulKernel, ViewWithALengthOneAxis) {
  V xv = ramp(6, 2), wv = ramp(6, 5);
  OwnedTensor x = OwnedTensor::f32({2, 3}, xv), w = OwnedTensor::f32({3, 2}, wv);
  OwnedTensor y(DType::F32, {2, 1, 2});
  ASSERT_EQ(errorText(runKernel(runFusedMatMul, "FusedMatMul",
                                attrs({intsAttr("shapeA", {2, 1, 3}),
                                       intsAttr("viewA", {0, 3, 1, 1})}),
                                {&x, &w}, {&y})),
            "");
  EXPECT_EQ(y.f32s(), naiveMatMul(xv, {2, 1, 3}, wv, {3, 2}));
}

} // namespace
