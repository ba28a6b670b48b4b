//===- PoolMath.h - Pooling windows and per-element math, host and device -===//
//
// The windows of the cpu pools (runtime/cpu/kernels/PoolWindows.h), worked
// out per output position instead of read from precomputed tables, so that
// the whole geometry travels to a kernel as one small struct. Every element
// function adds in the cpu kernel's order: a window's taps in row-major
// order forward, and backward the output positions covering an input in
// row-major order, which is the order the cpu's scatter reaches that input
// in. The gradients thus gather without atomics and agree bit for bit. Host
// tests run these same functions against the cpu kernels without a GPU.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_CUDA_KERNELS_POOLMATH_H
#define ZINC_RUNTIME_CUDA_KERNELS_POOLMATH_H

#include "HostDevice.h"
#include "WindowGeometry.h"
#include <cstdint>

namespace zinc::cuda {

/// Spatial axes a pool kernel handles; fewer run with leading axes of size 1.
constexpr int kPoolAxes = 3;

/// A pool over exactly three spatial axes (PoolWindows.h's Pool3 without its
/// tables). Output position o of axis a reads input o * stride[a] -
/// padBegin[a] + j * dil[a] for taps j in [0, kernel[a]).
struct PoolShape {
  int64_t planes = 0; // N * C
  int64_t in[kPoolAxes] = {1, 1, 1}, out[kPoolAxes] = {1, 1, 1};
  int64_t kernel[kPoolAxes] = {1, 1, 1}, stride[kPoolAxes] = {1, 1, 1};
  int64_t dil[kPoolAxes] = {1, 1, 1};
  int64_t padBegin[kPoolAxes] = {}, padEnd[kPoolAxes] = {};
  int64_t inPlane = 1, outPlane = 1;
};

/// The shape of `g` (resolved by the cpu's poolGeometry) over `planes`
/// planes, its axes right-aligned as makePool3 aligns them.
inline PoolShape poolShapeOf(const cpu::WindowGeometry &g, int64_t planes) {
  PoolShape p;
  p.planes = planes;
  int lead = kPoolAxes - static_cast<int>(g.rank());
  for (int a = lead; a < kPoolAxes; ++a) {
    size_t d = static_cast<size_t>(a - lead);
    p.in[a] = g.input[d];
    p.out[a] = g.output[d];
    p.kernel[a] = g.kernel[d];
    p.stride[a] = g.strides[d];
    p.dil[a] = g.dilations[d];
    p.padBegin[a] = g.padBegin[d];
    p.padEnd[a] = g.padEnd[d];
  }
  p.inPlane = p.in[0] * p.in[1] * p.in[2];
  p.outPlane = p.out[0] * p.out[1] * p.out[2];
  return p;
}

/// Floor and ceiling of a / b for b > 0 (WindowGeometry.h's, for devices).
ZINC_HD int64_t poolFloorDiv(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}
ZINC_HD int64_t poolCeilDiv(int64_t a, int64_t b) {
  return -poolFloorDiv(-a, b);
}
ZINC_HD int64_t poolMin(int64_t a, int64_t b) { return a < b ? a : b; }
ZINC_HD int64_t poolMax(int64_t a, int64_t b) { return a < b ? b : a; }

/// One output position's window along one axis: the input position of tap
/// 0, the taps [first, last) that read real input, and how many taps lie
/// inside the padded input (count_include_pad's count; taps past the end
/// pad, which only ceil mode makes, are not counted).
struct PoolAxisWindow {
  int64_t start, first, last, padded;
};

ZINC_HD PoolAxisWindow poolAxisWindow(const PoolShape &p, int a, int64_t o) {
  PoolAxisWindow w;
  w.start = o * p.stride[a] - p.padBegin[a];
  w.first = w.start < 0 ? poolCeilDiv(-w.start, p.dil[a]) : 0;
  w.last = poolMin(p.kernel[a], poolCeilDiv(p.in[a] - w.start, p.dil[a]));
  w.padded = poolMin(p.kernel[a],
                     poolCeilDiv(p.in[a] + p.padEnd[a] - w.start, p.dil[a]));
  return w;
}

/// Row-major output offset `o` within a plane -> its position per axis.
ZINC_HD void poolOutputPosition(const PoolShape &p, int64_t o,
                                int64_t pos[kPoolAxes]) {
  pos[2] = o % p.out[2];
  o /= p.out[2];
  pos[1] = o % p.out[1];
  pos[0] = o / p.out[1];
}

/// Row-major input offset `i` within a plane -> its position per axis.
ZINC_HD void poolInputPosition(const PoolShape &p, int64_t i,
                               int64_t pos[kPoolAxes]) {
  pos[2] = i % p.in[2];
  i /= p.in[2];
  pos[1] = i % p.in[1];
  pos[0] = i / p.in[1];
}

/// The three windows of output position `pos`.
ZINC_HD void poolWindows(const PoolShape &p, const int64_t pos[kPoolAxes],
                         PoolAxisWindow w[kPoolAxes]) {
  for (int a = 0; a < kPoolAxes; ++a)
    w[a] = poolAxisWindow(p, a, pos[a]);
}

/// AveragePool's divisor of a window: the taps in the padded input with
/// count_include_pad, else those reading real input. Positive wherever the
/// host's checks let the call run.
ZINC_HD int64_t poolDivisor(const PoolAxisWindow w[kPoolAxes],
                            bool countIncludePad) {
  return countIncludePad ? w[0].padded * w[1].padded * w[2].padded
                         : (w[0].last - w[0].first) * (w[1].last - w[1].first) *
                               (w[2].last - w[2].first);
}

/// A window's maximum and the input position it was read at.
struct PoolArgmax {
  float value;
  int64_t pos[kPoolAxes];
};

/// The maximum of output `pos`'s window, `x(i)` reading the plane's input
/// offset i as float. The first maximum in tap order wins a tie and a NaN
/// wins over numbers (the last NaN over earlier ones), exactly as the cpu's
/// forEachWindowMax, so MaxPool's Indices and MaxPoolGrad agree with it.
/// The window must read some real input.
template <typename LoadX>
ZINC_HD PoolArgmax poolWindowMax(const PoolShape &p,
                                 const PoolAxisWindow w[kPoolAxes], LoadX &&x) {
  PoolArgmax best{0.0f, {-1, 0, 0}};
  for (int64_t j0 = w[0].first; j0 < w[0].last; ++j0) {
    int64_t i0 = w[0].start + j0 * p.dil[0];
    for (int64_t j1 = w[1].first; j1 < w[1].last; ++j1) {
      int64_t i1 = w[1].start + j1 * p.dil[1];
      int64_t row = (i0 * p.in[1] + i1) * p.in[2];
      for (int64_t j2 = w[2].first; j2 < w[2].last; ++j2) {
        int64_t i2 = w[2].start + j2 * p.dil[2];
        float v = x(row + i2);
        if (best.pos[0] < 0 || v > best.value || v != v) {
          best.value = v;
          best.pos[0] = i0;
          best.pos[1] = i1;
          best.pos[2] = i2;
        }
      }
    }
  }
  return best;
}

/// MaxPool's Indices entry for a maximum at `pos` of plane `plane`: counted
/// from the start of the whole tensor, the spatial axes column major for
/// storage_order 1 (as the cpu kernel).
ZINC_HD int64_t poolIndexOf(const PoolShape &p, const int64_t pos[kPoolAxes],
                            int64_t plane, bool columnMajor) {
  int64_t spatial = columnMajor
                        ? pos[0] + pos[1] * p.in[0] + pos[2] * p.in[0] * p.in[1]
                        : (pos[0] * p.in[1] + pos[1]) * p.in[2] + pos[2];
  return plane * p.inPlane + spatial;
}

/// MaxPool at the plane's output offset `o`.
template <typename LoadX>
ZINC_HD PoolArgmax poolMaxAt(const PoolShape &p, int64_t o, LoadX &&x) {
  int64_t pos[kPoolAxes];
  PoolAxisWindow w[kPoolAxes];
  poolOutputPosition(p, o, pos);
  poolWindows(p, pos, w);
  return poolWindowMax(p, w, x);
}

/// AveragePool at the plane's output offset `o`: the real taps summed in
/// float in tap order, then divided (the cpu's ComputeT for f32, f16, bf16).
template <typename LoadX>
ZINC_HD float poolAverageAt(const PoolShape &p, int64_t o, bool countIncludePad,
                            LoadX &&x) {
  int64_t pos[kPoolAxes];
  PoolAxisWindow w[kPoolAxes];
  poolOutputPosition(p, o, pos);
  poolWindows(p, pos, w);
  float sum = 0;
  for (int64_t j0 = w[0].first; j0 < w[0].last; ++j0) {
    int64_t i0 = w[0].start + j0 * p.dil[0];
    for (int64_t j1 = w[1].first; j1 < w[1].last; ++j1) {
      int64_t i1 = w[1].start + j1 * p.dil[1];
      int64_t row = (i0 * p.in[1] + i1) * p.in[2];
      for (int64_t j2 = w[2].first; j2 < w[2].last; ++j2)
        sum += x(row + w[2].start + j2 * p.dil[2]);
    }
  }
  return sum / static_cast<float>(poolDivisor(w, countIncludePad));
}

/// The output positions [lo, hi] along axis a whose windows may reach input
/// position i; those between that do are the ones poolWindowReads accepts.
ZINC_HD void poolCoveringRange(const PoolShape &p, int a, int64_t i,
                               int64_t &lo, int64_t &hi) {
  int64_t t = i + p.padBegin[a];
  lo = poolMax(0, poolCeilDiv(t - (p.kernel[a] - 1) * p.dil[a], p.stride[a]));
  hi = poolMin(p.out[a] - 1, poolFloorDiv(t, p.stride[a]));
}

/// Whether some tap of output position o's window along axis a lands on
/// input position i (a real one, so it is among the window's real taps).
ZINC_HD bool poolWindowReads(const PoolShape &p, int a, int64_t o, int64_t i) {
  int64_t d = i - (o * p.stride[a] - p.padBegin[a]);
  return d >= 0 && d % p.dil[a] == 0 && d / p.dil[a] < p.kernel[a];
}

/// Calls fn(pos, o) for each output position `pos` (row-major offset o)
/// whose window reads input position `in`, in increasing o: the order in
/// which the cpu gradients' scatter adds into that input.
template <typename Fn>
ZINC_HD void poolForEachCoveringOutput(const PoolShape &p,
                                       const int64_t in[kPoolAxes], Fn &&fn) {
  int64_t lo[kPoolAxes], hi[kPoolAxes];
  for (int a = 0; a < kPoolAxes; ++a)
    poolCoveringRange(p, a, in[a], lo[a], hi[a]);
  int64_t pos[kPoolAxes];
  for (pos[0] = lo[0]; pos[0] <= hi[0]; ++pos[0]) {
    if (!poolWindowReads(p, 0, pos[0], in[0]))
      continue;
    for (pos[1] = lo[1]; pos[1] <= hi[1]; ++pos[1]) {
      if (!poolWindowReads(p, 1, pos[1], in[1]))
        continue;
      for (pos[2] = lo[2]; pos[2] <= hi[2]; ++pos[2]) {
        if (!poolWindowReads(p, 2, pos[2], in[2]))
          continue;
        fn(pos, (pos[0] * p.out[1] + pos[1]) * p.out[2] + pos[2]);
      }
    }
  }
}

/// MaxPoolGrad at the plane's input offset `i`: the sum, in float and in
/// output order, of dy over the windows whose maximum (recomputed from x
/// as the forward finds it) was read at i.
template <typename LoadDy, typename LoadX>
ZINC_HD float poolMaxGradAt(const PoolShape &p, int64_t i, LoadDy &&dy,
                            LoadX &&x) {
  int64_t in[kPoolAxes];
  poolInputPosition(p, i, in);
  float acc = 0;
  poolForEachCoveringOutput(p, in, [&](const int64_t *pos, int64_t o) {
    PoolAxisWindow w[kPoolAxes];
    poolWindows(p, pos, w);
    PoolArgmax m = poolWindowMax(p, w, x);
    if (m.pos[0] == in[0] && m.pos[1] == in[1] && m.pos[2] == in[2])
      acc += dy(o);
  });
  return acc;
}

/// AveragePoolGrad at the plane's input offset `i`: each covering window's
/// dy divided by the forward's divisor, added in output order.
template <typename LoadDy>
ZINC_HD float poolAverageGradAt(const PoolShape &p, int64_t i,
                                bool countIncludePad, LoadDy &&dy) {
  int64_t in[kPoolAxes];
  poolInputPosition(p, i, in);
  float acc = 0;
  poolForEachCoveringOutput(p, in, [&](const int64_t *pos, int64_t o) {
    PoolAxisWindow w[kPoolAxes];
    poolWindows(p, pos, w);
    acc += dy(o) / static_cast<float>(poolDivisor(w, countIncludePad));
  });
  return acc;
}

} // namespace zinc::cuda

#endif
