//===- TeamGemm.cpp - BLAS GEMMs split over the kernels' OpenMP team ------===//
#include "TeamGemm.h"
#include "zinc/runtime/cpu/Parallel.h"
#include <algorithm>
#include <cblas.h>
#include <mutex>

namespace zinc::cpu {

/// The fewest multiply-adds each thread's share of a split GEMM has. Below
/// about 7M multiply-adds OpenBLAS 0.3.21 takes other code paths ("direct"
/// and small-matrix kernels) that sum in another order, so a smaller share
/// would round differently from the same GEMM run whole, and a model that
/// amplifies rounding (BatchNorm over small batches) would train differently
/// with the thread count. Shares this big also dwarf the fork.
static constexpr double kShareMin = double(1 << 23);

/// OpenBLAS runs calls on its caller's thread from the first GEMM on
/// (TeamGemm.h says why). Other BLAS libraries have no such call and are
/// threaded, if at all, by their own settings.
static void useCallerThreadForBlas() {
  static std::once_flag once;
  std::call_once(once, [] {
#ifdef OPENBLAS_VERSION
    openblas_set_num_threads(1);
#endif
  });
}

static CBLAS_TRANSPOSE trans(bool t) { return t ? CblasTrans : CblasNoTrans; }

void gemmOnThisThread(const GemmArgs<float> &g) {
  useCallerThreadForBlas();
  cblas_sgemm(CblasRowMajor, trans(g.transA), trans(g.transB), g.m, g.n, g.k,
              g.alpha, g.a, g.lda, g.b, g.ldb, g.beta, g.c, g.ldc);
}

void gemmOnThisThread(const GemmArgs<double> &g) {
  useCallerThreadForBlas();
  cblas_dgemm(CblasRowMajor, trans(g.transA), trans(g.transB), g.m, g.n, g.k,
              g.alpha, g.a, g.lda, g.b, g.ldb, g.beta, g.c, g.ldc);
}

void gemmShare(int64_t extent, int threads, int t, int64_t &begin,
               int64_t &end) {
  constexpr int64_t kTile = 16;
  int64_t tiles = (extent + kTile - 1) / kTile;
  int64_t first = tiles * t / threads, last = tiles * (t + 1) / threads;
  begin = std::min(extent, first * kTile);
  end = std::min(extent, last * kTile);
}

/// The part of g that computes C's rows (or columns) [begin, end).
template <typename T>
static GemmArgs<T> slice(const GemmArgs<T> &g, bool byColumns, int64_t begin,
                         int64_t end) {
  GemmArgs<T> s = g;
  if (byColumns) {
    s.n = end - begin;
    s.b = g.b + (g.transB ? begin * g.ldb : begin);
    s.c = g.c + begin;
  } else {
    s.m = end - begin;
    s.a = g.a + (g.transA ? begin : begin * g.lda);
    s.c = g.c + begin * g.ldc;
  }
  return s;
}

template <typename T> static void teamGemmT(const GemmArgs<T> &g) {
  double work = double(g.m) * double(g.n) * double(g.k);
  int shares = static_cast<int>(
      std::min<double>(omp_get_max_threads(), work / kShareMin));
  if (!useThreads(shares >= 2) || std::max(g.m, g.n) < 32) {
    gemmOnThisThread(g);
    return;
  }
  // Split the longer side of C: each thread packs the other operand whole,
  // which costs least when that operand is the smaller one.
  bool byColumns = g.n > g.m;
  int64_t extent = byColumns ? g.n : g.m;
  // The whole team enters (a smaller team would be a new one, allocated);
  // threads past `shares` have no share.
#pragma omp parallel
  {
    // The team may be smaller than asked (OMP_DYNAMIC, thread limits):
    // the shares are cut for the threads that came.
    int t = omp_get_thread_num();
    int parts = std::min(shares, omp_get_num_threads());
    if (t < parts) {
      int64_t begin, end;
      gemmShare(extent, parts, t, begin, end);
      if (begin < end)
        gemmOnThisThread(slice(g, byColumns, begin, end));
    }
  }
}

void teamGemm(const GemmArgs<float> &g) { teamGemmT(g); }
void teamGemm(const GemmArgs<double> &g) { teamGemmT(g); }

} // namespace zinc::cpu
