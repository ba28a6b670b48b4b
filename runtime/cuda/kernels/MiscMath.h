//===- MiscMath.h - Clip, ReduceMax, Trilu, NLL loss, GatherColumns math --===//
//===//
//
// The per-element formulas and index math of the small training ops'
// kernels (Clip.cu, ReduceMax.cu, Trilu.cu, Losses.cu, GatherColumns.cu),
// each the cpu kernel's expression in the cpu's compute type (float for the
// 16-bit floats), written once for the GPU and for host tests that hold
// them to the cpu kernels. The NLL loss shares SoftmaxMath.h's target and
// coefficient math with SoftmaxCrossEntropyLoss; the reductions share
// RowsMath.h's plans with ReduceSum.
//
// Plain C++ on the host: no CUDA header, so the tests need no nvcc.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_CUDA_KERNELS_MISCMATH_H
#define ZINC_RUNTIME_CUDA_KERNELS_MISCMATH_H

#include "HostDevice.h"
#include <cstdint>

// A namespace of its own, as ElementwiseMath.h explains: inline helpers of
// one name in two families would be an ODR violation.
namespace zinc::cuda::misc {

//===----------------------------------------------------------------------===//
// Clip and ClipGrad
//===----------------------------------------------------------------------===//

/// min(max(v, lo), hi) as numpy.clip and the cpu kernel: hi wins when
/// lo > hi, and NaN passes through both comparisons.
template <typename C> ZINC_HD C clipValue(C v, C lo, C hi) {
  v = v < lo ? lo : v;
  return v > hi ? hi : v;
}

/// dy where lo < x < hi, else 0: the strict bounds of PyTorch's
/// hardtanh_backward, as the cpu's ClipGrad.
template <typename C> ZINC_HD C clipGradValue(C x, C g, C lo, C hi) {
  return x > lo && x < hi ? g : C(0);
}

//===----------------------------------------------------------------------===//
// ReduceMax and ReduceMaxGrad
//===----------------------------------------------------------------------===//

/// The running maximum `a` after element `v`: NaN wins, as in numpy's
/// maximum.reduce and the cpu kernel. Order does not change the value (the
/// sign of a zero aside, as on the cpu).
template <typename C> ZINC_HD C maxCombine(C a, C v) {
  return (v > a || v != v) ? v : a;
}

/// dx at one element: dy shared evenly by the `ties` elements equal to the
/// maximum y (PyTorch's amax backward), 0 elsewhere. NaN equals nothing, so
/// a NaN maximum passes no gradient, as on the cpu.
template <typename C>
ZINC_HD C reduceMaxGradValue(C x, C y, C dy, int64_t ties) {
  return x == y ? dy / static_cast<C>(ties) : C(0);
}

//===----------------------------------------------------------------------===//
// Trilu
//===----------------------------------------------------------------------===//

/// Whether Trilu keeps element (i, j) of a [rows, cols] matrix: j - i >= k
/// (upper) or j - i <= k (lower). k is clamped first, as the cpu clamps it,
/// so that a huge k cannot overflow.
ZINC_HD bool triluKeeps(int64_t i, int64_t j, int64_t k, bool upper,
                        int64_t rows, int64_t cols) {
  int64_t bound = rows + cols;
  k = k < -bound ? -bound : (k > bound ? bound : k);
  return upper ? j - i >= k : j - i <= k;
}

/// Row and column of element `e` of a batch of [rows, cols] matrices.
ZINC_HD void triluPosition(int64_t e, int64_t rows, int64_t cols, int64_t &i,
                           int64_t &j) {
  int64_t r = e / cols;
  j = e - r * cols;
  i = r % rows;
}

//===----------------------------------------------------------------------===//
// NegativeLogLikelihoodLoss and its gradient
//===----------------------------------------------------------------------===//

/// Element `e` of an [N, C, D] loss input: its class `c` and its position
/// p = n * D + d, which is also its target's index.
ZINC_HD void nllElement(int64_t e, int64_t classes, int64_t inner,
                        int64_t &position, int64_t &c) {
  int64_t d = e % inner, q = e / inner;
  c = q % classes;
  position = (q / classes) * inner + d;
}

/// Where the log-probability of class `t` at position `p` lives in the
/// [N, C, D] input.
ZINC_HD int64_t nllInputOffset(int64_t p, int64_t t, int64_t classes,
                               int64_t inner) {
  int64_t n = p / inner, d = p - n * inner;
  return (n * classes + t) * inner + d;
}

//===----------------------------------------------------------------------===//
// GatherColumns
//===----------------------------------------------------------------------===//

/// Element `e` of the copy of `count` rows of `width` units into columns
/// [column, column + width) of rows of `total` units: its row j (the index
/// position), its column c within the tile, and where it lands.
ZINC_HD int64_t gatherColumnsDest(int64_t e, int64_t width, int64_t total,
                                  int64_t column, int64_t &j, int64_t &c) {
  j = e / width;
  c = e - j * width;
  return j * total + column + c;
}

} // namespace zinc::cuda::misc

#endif
