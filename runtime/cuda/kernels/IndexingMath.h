//===- IndexingMath.h - Per-line and per-element math of IndexingOps.cu ---===//
//
// CumSum and ArgMax/ArgMin walk one line of a tensor viewed as
// [outer, n, inner] around their axis (the cpu kernels' view); Tile,
// GatherElements and Pad map each output element to the input element it
// reads, and constant Pad's gradient each input element to the output
// element it became.
// ZINC_HD, so that the host tests run them against the cpu kernels.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_CUDA_KERNELS_INDEXINGMATH_H
#define ZINC_RUNTIME_CUDA_KERNELS_INDEXINGMATH_H

#include "HostDevice.h"
#include "LayoutMath.h"
#include <cstdint>

namespace zinc::cuda {

/// A tensor of `shape` as [outer, n, inner] around `axis` (in range).
struct LineView {
  int64_t outer = 1, n = 1, inner = 1;
  ZINC_HD int64_t lines() const { return outer * inner; }
  /// The first element of line c (lines run through inner fastest).
  ZINC_HD int64_t start(int64_t c) const { return (c / inner) * n * inner + c % inner; }
};

inline LineView lineView(const int64_t *shape, int rank, int axis) {
  LineView v;
  for (int d = 0; d < rank; ++d)
    (d < axis ? v.outer : d == axis ? v.n : v.inner) *= shape[d];
  return v;
}

/// CumSum along one line: y[k] = sum of x[j] for j before k (exclusive) or
/// up to k, walking from the end with `reverse`; Acc is the accumulator
/// (double for floats, as the cpu kernel; the integer itself otherwise,
/// wrapping). toAcc / fromAcc convert elements.
template <typename Acc, typename X, typename Y, typename ToAcc, typename FromAcc>
ZINC_HD void cumSumLine(const X *x, Y *y, int64_t n, int64_t inner, bool exclusive,
                        bool reverse, ToAcc toAcc, FromAcc fromAcc) {
  Acc acc = 0;
  for (int64_t s = 0; s < n; ++s) {
    int64_t k = reverse ? n - 1 - s : s;
    Acc v = toAcc(x[k * inner]);
    if (!exclusive)
      acc += v;
    y[k * inner] = fromAcc(acc);
    if (exclusive)
      acc += v;
  }
}

/// The index of the largest (isMax) or smallest value(k), k in [0, n): NaN
/// counts as the extreme; ties go to the first index, or the last with
/// `last` (the cpu kernel's rule).
template <bool isMax, typename V, typename Value>
ZINC_HD int64_t argExtremum(int64_t n, bool last, Value value) {
  V best = value(0);
  int64_t at = 0;
  for (int64_t k = 1; k < n; ++k) {
    V v = value(k);
    bool better;
    if (best != best)
      better = last && v != v;
    else if (v != v)
      better = true;
    else
      better = isMax ? (last ? v >= best : v > best) : (last ? v <= best : v < best);
    if (better) {
      best = v;
      at = k;
    }
  }
  return at;
}

/// Tile: the input element output element e reads (index o of each
/// dimension reads o mod the input's size there).
ZINC_HD int64_t tileSource(int64_t e, int rank, const int64_t *outDims, const int64_t *inDims) {
  int64_t src = 0, stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    int64_t o = e % outDims[d];
    e /= outDims[d];
    src += (o % inDims[d]) * stride;
    stride *= inDims[d];
  }
  return src;
}

/// GatherElements: the data element output element e reads, its index
/// along `axis` being `index` (already wrapped into the data's range);
/// outDims is the indices' (and output's) shape, dataDims the data's.
ZINC_HD int64_t gatherElementsSource(int64_t e, int rank, const int64_t *outDims,
                                     const int64_t *dataDims, int axis, int64_t index) {
  int64_t src = 0, stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    int64_t o = e % outDims[d];
    e /= outDims[d];
    src += (d == axis ? index : o) * stride;
    stride *= dataDims[d];
  }
  return src;
}

/// ScatterND: the first data element tuple t of `indices` ([tuples, k],
/// row-major) selects, or -1 when an index is out of range.
template <typename I>
ZINC_HD int64_t scatterNdTarget(const I *indices, int64_t t, int k, const int64_t *dataDims,
                                int rank) {
  int64_t offset = 0;
  for (int j = 0; j < k; ++j) {
    int64_t stride = 1;
    for (int d = j + 1; d < rank; ++d)
      stride *= dataDims[d];
    int64_t i = wrapIndex(static_cast<int64_t>(indices[t * k + j]), dataDims[j]);
    if (i < 0)
      return -1;
    offset += i * stride;
  }
  return offset;
}

/// Pad's modes, in the order of the cpu's PadModeKind.
enum class PadMode : int { Constant, Reflect, Edge, Wrap };

/// The input index output index o of a dimension of input size n, `before`
/// elements added before it, reads; -1 for the constant (the cpu's
/// padSource).
ZINC_HD int64_t padSourceIndex(PadMode mode, int64_t o, int64_t before, int64_t n) {
  int64_t i = o - before;
  if (i >= 0 && i < n)
    return i;
  switch (mode) {
  case PadMode::Constant:
    return -1;
  case PadMode::Edge:
    return i < 0 ? 0 : n - 1;
  case PadMode::Reflect:
    if (n == 1)
      return 0;
    while (i < 0 || i >= n)
      i = i < 0 ? -i : 2 * (n - 1) - i;
    return i;
  case PadMode::Wrap:
    return ((i % n) + n) % n;
  }
  return -1;
}

/// A padded tensor's geometry, passed by value to the kernels.
struct PadView {
  int rank = 0;
  PadMode mode = PadMode::Constant;
  int64_t in[kMaxViewRank] = {}, out[kMaxViewRank] = {}, before[kMaxViewRank] = {};
};

/// The input element output element e of Pad reads, -1 for the constant.
ZINC_HD int64_t padSourceElement(const PadView &v, int64_t e) {
  int64_t src = 0, stride = 1;
  for (int d = v.rank - 1; d >= 0; --d) {
    int64_t o = e % v.out[d];
    e /= v.out[d];
    int64_t i = padSourceIndex(v.mode, o, v.before[d], v.in[d]);
    if (i < 0)
      return -1;
    src += i * stride;
    stride *= v.in[d];
  }
  return src;
}

/// The output element that input element e of a constant Pad was written
/// to, -1 where the pads cropped it: its gradient reads that element.
ZINC_HD int64_t padTargetElement(const PadView &v, int64_t e) {
  int64_t dst = 0, stride = 1;
  for (int d = v.rank - 1; d >= 0; --d) {
    int64_t i = e % v.in[d];
    e /= v.in[d];
    int64_t o = i + v.before[d];
    if (o < 0 || o >= v.out[d])
      return -1;
    dst += o * stride;
    stride *= v.out[d];
  }
  return dst;
}

/// ONNX's HardSigmoid, max(0, min(1, alpha x + beta)), and its gradient
/// (alpha inside the linear part, 0 outside), as the cpu kernels compute
/// them in float.
ZINC_HD float hardSigmoid(float x, float alpha, float beta) {
  float v = alpha * x + beta;
  return v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v;
}
ZINC_HD float hardSigmoidGrad(float x, float dy, float alpha, float beta) {
  float v = alpha * x + beta;
  return v > 0.0f && v < 1.0f ? dy * alpha : 0.0f;
}

} // namespace zinc::cuda

#endif
