//===- RowMathTest.cpp - The vectorised row loops against libm ------------===//
//
// Every ISA this CPU runs is checked, the scalar one always: exp, erf and
// tanh against the C library in double, over their whole useful range and
// at the edges (underflow, overflow, infinities, NaN); the GELU and erf
// gradients against their formulas in double; the reductions against plain
// sums. Row lengths that are not a multiple of the vector width exercise
// the tails.
//
//===----------------------------------------------------------------------===//
#include "zinc/runtime/cpu/RowMath.h"
#include <cmath>
#include <gtest/gtest.h>
#include <limits>
#include <vector>

using namespace zinc;
using namespace zinc::cpu;

namespace {

std::vector<simd::IsaKind> isas() {
  std::vector<simd::IsaKind> out;
  for (auto isa :
       {simd::IsaKind::Scalar, simd::IsaKind::Avx2, simd::IsaKind::Avx512})
    if (simd::simdSupported(isa))
      out.push_back(isa);
  return out;
}

std::vector<float> range(float lo, float hi, int n) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i)
    v[i] = lo + (hi - lo) * float(i) / float(n - 1);
  return v;
}

/// |got - want| <= rel * |want| + abs.
void expectClose(const std::vector<float> &x, const std::vector<float> &got,
                 double (*want)(double), double rel, double abs,
                 const char *what, simd::IsaKind isa) {
  for (size_t i = 0; i < x.size(); ++i) {
    double w = want(double(x[i]));
    ASSERT_NEAR(got[i], w, rel * std::fabs(w) + abs)
        << what << "(" << x[i] << ") in " << simd::isaName(isa);
  }
}

TEST(RowMath, ExpErfTanhMatchLibm) {
  for (auto isa : isas()) {
    const RowMath &m = rowMathFor(isa);
    std::vector<float> x = range(-87.0f, 88.0f, 100003), y(x.size());
    m.exp(x.data(), y.data(), x.size());
    expectClose(x, y, [](double v) { return std::exp(v); }, 4e-7, 0, "exp",
                isa);
    x = range(-5.0f, 5.0f, 100003);
    y.resize(x.size());
    m.erf(x.data(), y.data(), x.size());
    expectClose(x, y, [](double v) { return std::erf(v); }, 4e-7, 1e-7, "erf",
                isa);
    m.tanh(x.data(), y.data(), x.size());
    expectClose(x, y, [](double v) { return std::tanh(v); }, 4e-7, 1e-8,
                "tanh", isa);
  }
}

TEST(RowMath, EdgesOfExpErfTanh) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (auto isa : isas()) {
    const RowMath &m = rowMathFor(isa);
    // 17 values so both the vector body and the tail see them.
    std::vector<float> x = {-inf, -1000, -88, 89, 1000, inf, nan, 0, -0.0f,
                            -inf, -1000, -88, 89, 1000, inf, nan, 0};
    std::vector<float> y(x.size());
    m.exp(x.data(), y.data(), x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      if (std::isnan(x[i]))
        EXPECT_TRUE(std::isnan(y[i])) << simd::isaName(isa);
      else if (x[i] < -87.5f)
        EXPECT_EQ(y[i], 0.0f) << x[i] << " " << simd::isaName(isa);
      else if (x[i] > 88.5f)
        EXPECT_EQ(y[i], inf) << x[i] << " " << simd::isaName(isa);
      else
        EXPECT_NEAR(y[i], std::exp(double(x[i])), 1e-6 * std::exp(double(x[i])));
    }
    m.erf(x.data(), y.data(), x.size());
    for (size_t i = 0; i < x.size(); ++i)
      if (std::isnan(x[i]))
        EXPECT_TRUE(std::isnan(y[i])) << "erf " << simd::isaName(isa);
      else
        EXPECT_EQ(y[i], std::erf(x[i])) << "erf(" << x[i] << ")";
    m.tanh(x.data(), y.data(), x.size());
    for (size_t i = 0; i < x.size(); ++i)
      if (std::isnan(x[i]))
        EXPECT_TRUE(std::isnan(y[i])) << "tanh " << simd::isaName(isa);
      else
        EXPECT_EQ(y[i], std::tanh(x[i])) << "tanh(" << x[i] << ")";
  }
}

TEST(RowMath, GeluAndGradientsMatchTheirFormulas) {
  for (auto isa : isas()) {
    const RowMath &m = rowMathFor(isa);
    std::vector<float> x = range(-9.0f, 9.0f, 20001), dy(x.size()),
                       y(x.size());
    for (size_t i = 0; i < x.size(); ++i)
      dy[i] = 0.5f + float(i % 7) / 4.0f;
    auto check = [&](auto want, double tol, const char *what) {
      for (size_t i = 0; i < x.size(); ++i) {
        double w = want(double(x[i]), double(dy[i]));
        ASSERT_NEAR(y[i], w, tol * (1 + std::fabs(w)))
            << what << "(" << x[i] << ") in " << simd::isaName(isa);
      }
    };
    const double k = std::sqrt(2.0 / M_PI), c = 0.044715;
    m.gelu(x.data(), y.data(), x.size(), GeluForm::Erf);
    check([](double v, double) { return 0.5 * v * (1 + std::erf(v / M_SQRT2)); },
          1e-6, "gelu");
    m.gelu(x.data(), y.data(), x.size(), GeluForm::Tanh);
    check([&](double v, double) {
            return 0.5 * v * (1 + std::tanh(k * (v + c * v * v * v)));
          },
          1e-6, "gelu-tanh");
    m.geluGrad(x.data(), dy.data(), y.data(), x.size(), GeluForm::Erf);
    check([](double v, double g) {
            return g * (0.5 * (1 + std::erf(v / M_SQRT2)) +
                        v * std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI));
          },
          1e-6, "gelu-grad");
    m.geluGrad(x.data(), dy.data(), y.data(), x.size(), GeluForm::Tanh);
    check([&](double v, double g) {
            double t = std::tanh(k * (v + c * v * v * v));
            return g * (0.5 * (1 + t) +
                        0.5 * v * (1 - t * t) * k * (1 + 3 * c * v * v));
          },
          // (1 + t) cancels for very negative x, in float as in PyTorch.
          3e-6, "gelu-tanh-grad");
    m.erfGrad(x.data(), dy.data(), y.data(), x.size());
    check([](double v, double g) {
            return g * 2 / std::sqrt(M_PI) * std::exp(-v * v);
          },
          1e-6, "erf-grad");
  }
}

TEST(RowMath, SoftmaxPiecesAndReductions) {
  for (auto isa : isas()) {
    const RowMath &m = rowMathFor(isa);
    for (int64_t n : {0, 1, 7, 16, 37, 8192 + 3}) {
      std::vector<float> x(n), dy(n), y(n), dx(n);
      double mx = -INFINITY, sum = 0, dot = 0;
      for (int64_t j = 0; j < n; ++j) {
        x[j] = float((j * 37) % 101) / 10.0f - 5.0f;
        dy[j] = float((j * 11) % 13) / 13.0f;
        mx = std::max(mx, double(x[j]));
      }
      EXPECT_EQ(m.max(x.data(), n), float(mx)) << n;
      for (int64_t j = 0; j < n; ++j) {
        sum += std::exp(double(x[j]) - mx);
        dot += double(x[j]) * double(dy[j]);
      }
      // Float sums, as PyTorchs.
      EXPECT_NEAR(m.sumExp(x.data(), n, float(mx)), sum, 4e-6 * sum + 1e-30);
      EXPECT_NEAR(m.dot(x.data(), dy.data(), n), dot, 1e-5 * (1 + std::fabs(dot)));
      m.expScale(x.data(), y.data(), n, float(mx), float(1 / sum));
      for (int64_t j = 0; j < n; ++j)
        ASSERT_NEAR(y[j], std::exp(double(x[j]) - mx) / sum, 1e-6);
      m.softmaxGrad(y.data(), dy.data(), dx.data(), n, 0.25f);
      for (int64_t j = 0; j < n; ++j)
        ASSERT_NEAR(dx[j], double(y[j]) * (double(dy[j]) - 0.25), 1e-7);
    }
  }
}

} // namespace

namespace {

TEST(RowMath, LayerNormGradMatchesItsFormula) {
  for (auto isa : isas()) {
    const RowMath &m = rowMathFor(isa);
    for (int64_t n : {1, 15, 64, 515}) {
      std::vector<float> x(n), dy(n), gamma(n), dx(n);
      for (int64_t j = 0; j < n; ++j) {
        x[j] = std::cos(0.3 * double(j)) * 2 + 0.5f;
        dy[j] = std::sin(0.7 * double(j));
        gamma[j] = 1.0f + float(j % 5) / 8.0f;
      }
      const float mean = 0.4f, rstd = 1.3f;
      m.layerNormGrad(x.data(), dy.data(), gamma.data(), dx.data(), n, mean,
                      rstd);
      double sumG = 0, sumGX = 0;
      for (int64_t j = 0; j < n; ++j) {
        double g = double(dy[j]) * gamma[j], h = (double(x[j]) - mean) * rstd;
        sumG += g;
        sumGX += g * h;
      }
      for (int64_t j = 0; j < n; ++j) {
        double g = double(dy[j]) * gamma[j], h = (double(x[j]) - mean) * rstd;
        double want = rstd * (g - sumG / n - h * sumGX / n);
        ASSERT_NEAR(dx[j], want, 2e-6 * (1 + std::fabs(want)))
            << "n " << n << " j " << j << " " << simd::isaName(isa);
      }
    }
  }
}

} // namespace

namespace {

TEST(RowMath, LayerNormParamGradAccumulates) {
  for (auto isa : isas()) {
    const RowMath &m = rowMathFor(isa);
    const int64_t n = 37;
    std::vector<float> x(n), dy(n);
    std::vector<double> scale(n, 1.0), bias(n, -1.0);
    for (int64_t j = 0; j < n; ++j) {
      x[j] = float(j % 7) - 3.0f;
      dy[j] = 0.25f * float(j % 5);
    }
    m.layerNormParamGrad(x.data(), dy.data(), n, 0.5f, 2.0f, scale.data(),
                         bias.data());
    m.layerNormParamGrad(x.data(), dy.data(), n, 0.5f, 2.0f, scale.data(),
                         nullptr);
    for (int64_t j = 0; j < n; ++j) {
      EXPECT_DOUBLE_EQ(scale[j], 1.0 + 2 * double(dy[j]) * (x[j] - 0.5) * 2.0)
          << j << " " << simd::isaName(isa);
      EXPECT_DOUBLE_EQ(bias[j], -1.0 + double(dy[j])) << j;
    }
  }
}

} // namespace
