//===- TeamGemm.h - BLAS GEMMs split over the kernels' OpenMP team --------===//
//
// zinc's elementwise kernels and its GEMMs share one pool of threads: the
// OpenMP team. OpenBLAS keeps a pthread pool of its own whose threads spin
// for a while after every call, and on a machine with as many threads as
// cores they spin on the core the next OpenMP kernel wants (measured on the
// 2-core bench machine: a step's Reshape copies took 4x longer at 2 threads
// than at 1). So OpenBLAS is told to run every call on its caller's thread,
// and a GEMM worth threads is split here into one sub-GEMM per team thread,
// by rows of C when it is taller than wide and by columns otherwise.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_CPU_KERNELS_TEAMGEMM_H
#define ZINC_RUNTIME_CPU_KERNELS_TEAMGEMM_H

#include <cstdint>

namespace zinc::cpu {

/// One row-major GEMM: c[m,n] = alpha op(a) op(b) + beta c, with op(a)
/// [m,k] (a stored [k,m] when transA) and op(b) [k,n] (b stored [n,k] when
/// transB), and leading dimensions lda, ldb, ldc. BLAS's sizes: every
/// dimension fits in an int (checked by the callers).
template <typename T> struct GemmArgs {
  bool transA = false, transB = false;
  int64_t m = 0, n = 0, k = 0;
  T alpha = 1;
  const T *a = nullptr;
  int64_t lda = 0;
  const T *b = nullptr;
  int64_t ldb = 0;
  T beta = 0;
  T *c = nullptr;
  int64_t ldc = 0;

  /// alpha op(a) op(b) + beta c, every field named in BLAS's order.
  static GemmArgs make(bool transA, bool transB, int64_t m, int64_t n,
                       int64_t k, T alpha, const T *a, int64_t lda, const T *b,
                       int64_t ldb, T beta, T *c, int64_t ldc) {
    GemmArgs g;
    g.transA = transA;
    g.transB = transB;
    g.m = m;
    g.n = n;
    g.k = k;
    g.alpha = alpha;
    g.a = a;
    g.lda = lda;
    g.b = b;
    g.ldb = ldb;
    g.beta = beta;
    g.c = c;
    g.ldc = ldc;
    return g;
  }
};

/// Runs the GEMM on the calling thread through BLAS (one BLAS thread).
void gemmOnThisThread(const GemmArgs<float> &g);
void gemmOnThisThread(const GemmArgs<double> &g);

/// Runs the GEMM over the OpenMP team when it is big enough to gain from
/// threads and no parallel region is running, on the calling thread
/// otherwise.
void teamGemm(const GemmArgs<float> &g);
void teamGemm(const GemmArgs<double> &g);

/// The rows [begin, end) of C's m (or its columns, when byColumns) that
/// thread `t` of `threads` computes: equal shares, cut at multiples of 16
/// so that each share starts on a BLAS micro-tile.
void gemmShare(int64_t extent, int threads, int t, int64_t &begin,
               int64_t &end);

} // namespace zinc::cpu

#endif
