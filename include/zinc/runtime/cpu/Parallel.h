//===- Parallel.h - Loops over OpenMP threads without heap allocation -----===//
//
// libgomp allocates a new thread team for every parallel region that runs
// on one thread (an `if` clause that is false, OMP_NUM_THREADS=1 or a
// one-core machine, a region nested in another) and frees it at the end of
// the region: a heap allocation per kernel call. A region with several
// threads reuses the team its thread made the first time. So kernels enter
// a parallel region only when it will have several threads, and otherwise
// run the loop on the calling thread, through these helpers.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_CPU_PARALLEL_H
#define ZINC_RUNTIME_CPU_PARALLEL_H

#include <cstdint>
#include <omp.h>

namespace zinc::cpu {

/// Whether a loop worth threads (`big`) should enter a parallel region now:
/// there are several threads and no region is running already.
inline bool useThreads(bool big) {
  return big && omp_get_max_threads() > 1 && !omp_in_parallel();
}

/// fn(i) for every i in [0, n): statically scheduled over OpenMP threads
/// when useThreads(big), in order on the calling thread otherwise.
template <typename Fn> void parallelFor(int64_t n, bool big, Fn &&fn) {
  if (useThreads(big)) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i)
      fn(i);
    return;
  }
  for (int64_t i = 0; i < n; ++i)
    fn(i);
}

} // namespace zinc::cpu

#endif
