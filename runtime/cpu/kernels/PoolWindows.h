//===- PoolWindows.h - Pooling windows over three spatial axes ------------===//
//
// MaxPool, AveragePool and their gradient kernels walk the same windows:
// up to three spatial axes, 1-D and 2-D pools running as 3-D pools whose
// leading axes have size 1, with the taps of each output position that read
// real input (and, for count_include_pad, those inside the padded input)
// precomputed per axis into the call's workspace.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_CPU_KERNELS_POOLWINDOWS_H
#define ZINC_RUNTIME_CPU_KERNELS_POOLWINDOWS_H

#include "KernelUtil.h"
#include "WindowGeometry.h"

namespace zinc::cpu {

/// Per axis and output position, the kernel taps that read real input and,
/// for count_include_pad, how many taps lie inside the padded input.
struct AxisTaps {
  int64_t *first = nullptr, *last = nullptr, *padded = nullptr;
};

/// A pooling problem over exactly three spatial axes.
struct Pool3 {
  int64_t planes = 0; // N * C
  int64_t in[3], out[3], dil[3];
  int64_t inPlane = 0, outPlane = 0;
  AxisTaps taps[3];
  /// Input position of tap 0 of each output position, per axis.
  int64_t *start[3] = {};
};

/// The windows of `g` over `planes` (N * C) planes, their per-position
/// tables in one piece of the call's workspace: 4 * (out[0] + out[1] +
/// out[2]) int64s, with the output axes padded to three by 1s.
llvm::Expected<Pool3> makePool3(const KernelCall &call, const WindowGeometry &g,
                                int64_t planes);

/// Checks X [N, C, spatial...] against Y [N, C, ...] and returns the
/// spatial geometry; kernel_shape is required by every pool. Errors name
/// call.opType.
llvm::Expected<WindowGeometry> poolGeometry(const KernelCall &call,
                                            const TensorRef &x,
                                            const TensorRef &y, bool ceilMode,
                                            bool allowDilations);

/// Calls fn(o, best, i0, i1, i2) for each output position o of one plane
/// `xp`, in row-major order, with `best` its window's maximum (as
/// ComputeT<T>) at input position (i0, i1, i2). The first maximum of the
/// window wins a tie and a NaN wins over numbers, as in PyTorch, so that
/// MaxPool's indices and its gradient agree with PyTorch's. Every window
/// must read some real input.
template <typename T, typename Fn>
void forEachWindowMax(const Pool3 &p, const T *xp, Fn &&fn) {
  using C = ComputeT<T>;
  int64_t o = 0;
  for (int64_t o0 = 0; o0 < p.out[0]; ++o0)
    for (int64_t o1 = 0; o1 < p.out[1]; ++o1)
      for (int64_t o2 = 0; o2 < p.out[2]; ++o2, ++o) {
        C best{};
        int64_t bi0 = -1, bi1 = 0, bi2 = 0;
        for (int64_t j0 = p.taps[0].first[o0]; j0 < p.taps[0].last[o0]; ++j0) {
          int64_t i0 = p.start[0][o0] + j0 * p.dil[0];
          for (int64_t j1 = p.taps[1].first[o1]; j1 < p.taps[1].last[o1];
               ++j1) {
            int64_t i1 = p.start[1][o1] + j1 * p.dil[1];
            const T *row = xp + (i0 * p.in[1] + i1) * p.in[2];
            for (int64_t j2 = p.taps[2].first[o2]; j2 < p.taps[2].last[o2];
                 ++j2) {
              int64_t i2 = p.start[2][o2] + j2 * p.dil[2];
              C v = load(row[i2]);
              // `v != v` (NaN) is false for integers.
              if (bi0 < 0 || v > best || v != v) {
                best = v;
                bi0 = i0;
                bi1 = i1;
                bi2 = i2;
              }
            }
          }
        }
        fn(o, best, bi0, bi1, bi2);
      }
}

} // namespace zinc::cpu

#endif
