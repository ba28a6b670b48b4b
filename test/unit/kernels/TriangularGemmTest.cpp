//===- TriangularGemmTest.cpp - GEMMs that skip a triangle of zeros -------===//
//
// TriangularGemm computes what a full GEMM computes when the skipped
// triangle holds zeros (lowerA, lowerB), and the lower triangle of the full
// product with zeros above it (lowerY): for each triangle, both transposes,
// alpha and beta, sides that do not divide into register tiles or blocks,
// and leading dimensions wider than the matrices. The values are small
// multiples of 1/8, so every sum is exact and the comparison is equality.
// Through the FusedMatMul kernel: the attributes on a batch, f64 and f16
// outputs with lowerY, and the diagnostics.
//
//===----------------------------------------------------------------------===//
#include "TriangularGemm.h"
#include "test/unit/kernels/KernelCallHelpers.h"
#include <gtest/gtest.h>
#include <vector>

using namespace zinc;
using namespace zinc::cpu;
using namespace zinc::cpu::test;

namespace {

float value(int64_t i, int salt) {
  return static_cast<float>(((i * 7 + salt) % 13) - 6) / 8.0f;
}

/// A rows x cols matrix stored with leading dimension ld, element (i, j)
/// zero where `zero(i, j)`.
template <typename ZeroFn>
std::vector<float> matrix(int64_t rows, int64_t cols, int64_t ld, int salt,
                          ZeroFn zero) {
  std::vector<float> v(rows * ld, 99.0f); // padding a kernel must not read
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      v[i * ld + j] = zero(i, j) ? 0.0f : value(i * cols + j, salt);
  return v;
}

/// c = alpha op(a) op(b) + beta c in double, element by element, with the
/// output's entries above the diagonal zero for LowerY.
std::vector<float> naive(const GemmArgs<float> &g, Triangle t) {
  std::vector<float> c(g.c, g.c + g.m * g.ldc);
  for (int64_t i = 0; i < g.m; ++i)
    for (int64_t j = 0; j < g.n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < g.k; ++p)
        s += double(g.transA ? g.a[p * g.lda + i] : g.a[i * g.lda + p]) *
             double(g.transB ? g.b[j * g.ldb + p] : g.b[p * g.ldb + j]);
      double y = g.alpha * s + (g.beta == 0 ? 0.0 : g.beta * g.c[i * g.ldc + j]);
      c[i * g.ldc + j] = t == Triangle::LowerY && j > i ? 0.0f : float(y);
    }
  return c;
}

const char *name(Triangle t) {
  switch (t) {
  case Triangle::None: return "None";
  case Triangle::LowerY: return "LowerY";
  case Triangle::LowerOpA: return "LowerOpA";
  case Triangle::UpperOpA: return "UpperOpA";
  case Triangle::LowerOpB: return "LowerOpB";
  case Triangle::UpperOpB: return "UpperOpB";
  }
  return "?";
}

TEST(TriangularGemm, MatchesTheFullProductOfItsZeros) {
  // s: the square side (1, a part tile, past kKC and kNC); w: the other.
  for (int64_t s : {1, 5, 37, 150})
    for (int64_t w : {3, 64, 70})
      for (Triangle t : {Triangle::LowerY, Triangle::LowerOpA, Triangle::UpperOpA,
                         Triangle::LowerOpB, Triangle::UpperOpB, Triangle::None})
        for (int trans = 0; trans < 4; ++trans)
          for (float beta : {0.0f, 1.0f, 2.0f}) {
            bool ta = trans & 1, tb = trans & 2;
            int64_t m = s, n = s, k = w;
            if (t == Triangle::LowerOpA || t == Triangle::UpperOpA)
              n = w, k = s;
            if (t == Triangle::LowerOpB || t == Triangle::UpperOpB)
              m = w, k = s;
            // op(A) (m x k) and op(B) (k x n): zero where the triangle says.
            auto zeroA = [&](int64_t i, int64_t p) {
              return (t == Triangle::LowerOpA && p > i) ||
                     (t == Triangle::UpperOpA && p < i);
            };
            auto zeroB = [&](int64_t p, int64_t j) {
              return (t == Triangle::LowerOpB && j > p) ||
                     (t == Triangle::UpperOpB && j < p);
            };
            int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 2, ldc = n + 1;
            std::vector<float> a =
                ta ? matrix(k, m, lda, 1, [&](int64_t p, int64_t i) { return zeroA(i, p); })
                   : matrix(m, k, lda, 1, zeroA);
            std::vector<float> b =
                tb ? matrix(n, k, ldb, 2, [&](int64_t j, int64_t p) { return zeroB(p, j); })
                   : matrix(k, n, ldb, 2, zeroB);
            std::vector<float> c = matrix(m, n, ldc, 3, [](int64_t, int64_t) { return false; });
            if (beta == 0.0f) // BLAS does not read C at beta 0
              std::fill(c.begin(), c.end(), std::nanf(""));
            auto g = GemmArgs<float>::make(ta, tb, m, n, k, 0.5f, a.data(), lda,
                                           b.data(), ldb, beta, c.data(), ldc);
            std::vector<float> expect = naive(g, t);
            triangularGemm(g, t);
            for (int64_t i = 0; i < m; ++i)
              for (int64_t j = 0; j < n; ++j)
                ASSERT_EQ(c[i * ldc + j], expect[i * ldc + j])
                    << name(t) << " m " << m << " n " << n << " k " << k
                    << " ta " << ta << " tb " << tb << " beta " << beta
                    << " at (" << i << ", " << j << ")";
          }
}

TEST(TriangularGemm, AttributesNameTheStoredOperand) {
  Triangle t;
  ASSERT_TRUE(triangleOf(true, false, false, false, false, t));
  EXPECT_EQ(t, Triangle::LowerOpA);
  ASSERT_TRUE(triangleOf(true, false, false, true, false, t));
  EXPECT_EQ(t, Triangle::UpperOpA);
  ASSERT_TRUE(triangleOf(false, true, false, false, true, t));
  EXPECT_EQ(t, Triangle::UpperOpB);
  ASSERT_TRUE(triangleOf(false, false, true, true, true, t));
  EXPECT_EQ(t, Triangle::LowerY);
  EXPECT_FALSE(triangleOf(true, false, true, false, false, t));
  EXPECT_TRUE(triangleFits(Triangle::LowerY, 4, 4, 9));
  EXPECT_FALSE(triangleFits(Triangle::LowerY, 4, 5, 4));
  EXPECT_FALSE(triangleFits(Triangle::LowerOpA, 4, 4, 5));
  EXPECT_FALSE(triangleFits(Triangle::LowerOpB, 4, 4, 5));
}

OwnedTensor tensorOf(DType dtype, llvm::ArrayRef<int64_t> shape,
                     const std::vector<double> &v) {
  switch (dtype) {
  case DType::F64: return OwnedTensor::of<double>(dtype, shape, v);
  case DType::F16: return OwnedTensor::of<Half>(dtype, shape, v);
  case DType::BF16: return OwnedTensor::of<BFloat16>(dtype, shape, v);
  default: return OwnedTensor::of<float>(dtype, shape, v);
  }
}

std::vector<double> valuesOf(const OwnedTensor &t, DType dtype) {
  switch (dtype) {
  case DType::F64: return t.values<double>();
  case DType::F16: return t.values<Half>();
  case DType::BF16: return t.values<BFloat16>();
  default: return t.values<float>();
  }
}

/// Row-major [batch..., s, s] values, zero above each matrix's diagonal.
std::vector<double> lowerMatrices(int64_t batch, int64_t s, int salt) {
  std::vector<double> v(batch * s * s);
  for (int64_t i = 0; i < batch * s * s; ++i)
    v[i] = (i % s) > (i / s) % s ? 0.0 : value(i, salt);
  return v;
}

// A batch of attention-shaped products through the FusedMatMul kernel:
// each triangle agrees with the same product without it (lowerY: with
// zeros above the diagonal), in f32 and f64.
TEST(TriangularGemm, FusedMatMulAttributesOnABatch) {
  const int64_t s = 19, d = 8;
  std::vector<double> p = lowerMatrices(6, s, 1);
  for (DType dtype : {DType::F32, DType::F64}) {
    OwnedTensor lower = tensorOf(dtype, {2, 3, s, s}, p);
    OwnedTensor v = tensorOf(dtype, {2, 3, s, d}, randomValues(6 * s * d, -1, 1, 7));
    struct Case {
      const char *attr;
      int transA, transB;
      bool lowerIsA;
    } cases[] = {{"lowerA", 0, 0, true}, {"lowerA", 1, 0, true},
                 {"lowerB", 1, 0, false}};
    for (const Case &c : cases) {
      // lowerA: P @ V or P^T @ V; lowerB: V^T @ P.
      OwnedTensor &a = c.lowerIsA ? lower : v;
      OwnedTensor &b = c.lowerIsA ? v : lower;
      std::vector<int64_t> out = c.lowerIsA ? std::vector<int64_t>{2, 3, s, d}
                                            : std::vector<int64_t>{2, 3, d, s};
      OwnedTensor full(dtype, out), skipped(dtype, out);
      auto base = {intAttr("transA", c.transA), intAttr("transB", c.transB)};
      ASSERT_EQ(errorText(runKernel(runFusedMatMul, "FusedMatMul", attrs(base),
                                    {&a, &b}, {&full})), "");
      ASSERT_EQ(errorText(runKernel(runFusedMatMul, "FusedMatMul",
                                    attrs({intAttr("transA", c.transA),
                                           intAttr("transB", c.transB),
                                           intAttr(c.attr, 1)}),
                                    {&a, &b}, {&skipped})), "");
      std::vector<double> x = valuesOf(full, dtype), y = valuesOf(skipped, dtype);
      ASSERT_EQ(x.size(), y.size());
      for (size_t i = 0; i < x.size(); ++i)
        EXPECT_NEAR(x[i], y[i], 1e-5) << c.attr << " transA " << c.transA << " at " << i;
    }
  }
}

TEST(TriangularGemm, LowerYZerosAboveTheDiagonalInEveryType) {
  const int64_t s = 9, d = 4;
  for (DType dtype : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
    OwnedTensor q = tensorOf(dtype, {2, s, d}, randomValues(2 * s * d, -1, 1, 3));
    OwnedTensor k = tensorOf(dtype, {2, s, d}, randomValues(2 * s * d, -1, 1, 4));
    OwnedTensor full(dtype, {2, s, s}), lower(dtype, {2, s, s});
    ASSERT_EQ(errorText(runKernel(runFusedMatMul, "FusedMatMul",
                                  attrs({intAttr("transB", 1)}), {&q, &k}, {&full})), "");
    ASSERT_EQ(errorText(runKernel(runFusedMatMul, "FusedMatMul",
                                  attrs({intAttr("transB", 1), intAttr("lowerY", 1)}),
                                  {&q, &k}, {&lower})), "");
    std::vector<double> x = valuesOf(full, dtype), y = valuesOf(lower, dtype);
    double tolerance = dtype == DType::F16 || dtype == DType::BF16 ? 0.0 : 1e-6;
    for (int64_t i = 0; i < 2 * s * s; ++i) {
      int64_t row = (i / s) % s, col = i % s;
      if (col > row)
        EXPECT_EQ(y[i], 0.0) << dtypeName(dtype).str() << " at " << i;
      else
        EXPECT_NEAR(y[i], x[i], tolerance) << dtypeName(dtype).str() << " at " << i;
    }
  }
}

TEST(TriangularGemm, FusedMatMulRefusesWhatItCannotSkip) {
  OwnedTensor a = OwnedTensor::f32({4, 4}, std::vector<double>(16, 1));
  OwnedTensor b = OwnedTensor::f32({4, 3}, std::vector<double>(12, 1));
  OwnedTensor y(DType::F32, {4, 3});
  EXPECT_EQ(errorText(runKernel(runFusedMatMul, "FusedMatMul",
                                attrs({intAttr("lowerA", 1), intAttr("lowerY", 1)}),
                                {&a, &b}, {&y})),
            "FusedMatMul: sets more than one of lowerA, lowerB, lowerY");
  EXPECT_EQ(errorText(runKernel(runFusedMatMul, "FusedMatMul",
                                attrs({intAttr("lowerY", 1)}), {&a, &b}, {&y})),
            "FusedMatMul: lowerA, lowerB or lowerY needs square matrices, not a "
            "[4,4] x [4,3] product");
  EXPECT_EQ(errorText(runKernel(runFusedMatMul, "FusedMatMul",
                                attrs({intAttr("lowerB", 1)}), {&a, &b}, {&y})),
            "FusedMatMul: lowerA, lowerB or lowerY needs square matrices, not a "
            "[4,4] x [4,3] product");
}

} // namespace
