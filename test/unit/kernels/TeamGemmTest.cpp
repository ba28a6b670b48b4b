//===- TeamGemmTest.cpp - GEMMs split over the OpenMP team ----------------===//
//
// A GEMM split by rows or columns over the team computes every element as
// the whole GEMM on one thread does, for every transpose and leading
// dimension, and for shapes that do not divide evenly among the threads.
//
//===----------------------------------------------------------------------===//
#include "TeamGemm.h"
#include <gtest/gtest.h>
#include <omp.h>
#include <vector>

using namespace zinc::cpu;

namespace {

float value(int64_t i, int salt) {
  return static_cast<float>(((i * 7 + salt) % 13) - 6) / 8.0f;
}

/// c = alpha op(a) op(b) + beta c in double, element by element.
std::vector<double> naive(const GemmArgs<float> &g) {
  std::vector<double> c(g.m * g.ldc);
  for (int64_t i = 0; i < g.m; ++i)
    for (int64_t j = 0; j < g.n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < g.k; ++p)
        s += double(g.transA ? g.a[p * g.lda + i] : g.a[i * g.lda + p]) *
             double(g.transB ? g.b[j * g.ldb + p] : g.b[p * g.ldb + j]);
      c[i * g.ldc + j] = g.alpha * s + g.beta * double(g.c[i * g.ldc + j]);
    }
  return c;
}

struct Shape {
  int64_t m, n, k;
};

TEST(TeamGemm, SplitsMatchOneThreadForEveryLayout) {
  int saved = omp_get_max_threads();
  omp_set_num_threads(3);
  // Big enough to split (TeamGemm.cpp's kShareMin per thread), taller
  // than wide, wider than tall, and uneven over three threads.
  for (Shape s : {Shape{1030, 300, 70}, Shape{64, 2100, 130},
                  Shape{701, 699, 40}}) {
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) {
        GemmArgs<float> g;
        g.transA = ta;
        g.transB = tb;
        g.m = s.m;
        g.n = s.n;
        g.k = s.k;
        g.alpha = 0.5f;
        g.beta = 2.0f;
        // Leading dimensions wider than the matrices, as batch strides are.
        g.lda = (ta ? s.m : s.k) + 3;
        g.ldb = (tb ? s.k : s.n) + 5;
        g.ldc = s.n + 2;
        std::vector<float> a((ta ? s.k : s.m) * g.lda),
            b((tb ? s.n : s.k) * g.ldb), c(s.m * g.ldc);
        for (size_t i = 0; i < a.size(); ++i)
          a[i] = value(i, 1);
        for (size_t i = 0; i < b.size(); ++i)
          b[i] = value(i, 2);
        for (size_t i = 0; i < c.size(); ++i)
          c[i] = value(i, 3);
        g.a = a.data();
        g.b = b.data();
        g.c = c.data();
        std::vector<double> want = naive(g);
        std::vector<float> before = c;
        teamGemm(g);
        for (int64_t i = 0; i < s.m; ++i)
          for (int64_t j = 0; j < g.ldc; ++j) {
            // Padding between rows stays untouched.
            double w = j < s.n ? want[i * g.ldc + j] : before[i * g.ldc + j];
            ASSERT_NEAR(c[i * g.ldc + j], w, 1e-3 * (1 + std::abs(w)))
                << s.m << "x" << s.n << "x" << s.k << " ta " << ta << " tb "
                << tb << " at " << i << "," << j;
          }
      }
  }
  omp_set_num_threads(saved);
}

TEST(TeamGemm, SharesCoverTheExtentOnTileBoundaries) {
  for (int64_t extent : {1, 15, 16, 17, 100, 4096})
    for (int threads : {1, 2, 3, 8}) {
      int64_t next = 0;
      for (int t = 0; t < threads; ++t) {
        int64_t begin, end;
        gemmShare(extent, threads, t, begin, end);
        EXPECT_EQ(begin, next);
        EXPECT_LE(begin, end);
        if (end < extent)
          EXPECT_EQ(end % 16, 0);
        next = end;
      }
      EXPECT_EQ(next, extent);
    }
}

} // namespace
