//===- SoftmaxMath.h - Row geometry and per-element math of Softmax.cu ----===//
//
// The softmax family views its input as [outer, d, inner] with the row (the
// statistic) along d, as the cpu kernels do (cpu::softmaxGeometry). Row r
// is (o, i) = (r / inner, r % inner); for the losses that is the position
// (n, d1..dk) of a [N, C, d1..dk] input, so r is also the target's index.
// The formulas are the cpu kernels', in float, with row sums passed in as
// the double they were accumulated in; they live here, ZINC_HD, so that the
// host tests check them against the cpu kernels on any machine.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_CUDA_KERNELS_SOFTMAXMATH_H
#define ZINC_RUNTIME_CUDA_KERNELS_SOFTMAXMATH_H

#include "HostDevice.h"
#include <cmath>
#include <cstdint>

namespace zinc::cuda {

//===----------------------------------------------------------------------===//
// Geometry (host)
//===----------------------------------------------------------------------===//

/// A softmax-family input as [outer, d, inner], reduced over d.
struct SoftmaxRows {
  int64_t outer = 1, d = 1, inner = 1;
  ZINC_HD int64_t rows() const { return outer * inner; }
  ZINC_HD int64_t elements() const { return outer * d * inner; }
};

/// The view of `shape` (rank `rank`) at `axis` (negative counts from the
/// end): one axis, or with `flatten` (Softmax before opset 13) every axis
/// from `axis` on. False when the axis is out of range, as
/// cpu::normalizeAxis refuses it; a scalar is one row of one element.
inline bool softmaxRows(const int64_t *shape, int64_t rank, int64_t axis,
                        bool flatten, SoftmaxRows &out) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= (rank > 1 ? rank : 1))
    return false;
  auto product = [&](int64_t from, int64_t to) {
    int64_t n = 1;
    for (int64_t k = from; k < to; ++k)
      n *= shape[k];
    return n;
  };
  out.outer = product(0, a);
  out.d = flatten ? product(a, rank) : (rank == 0 ? 1 : shape[a]);
  out.inner = flatten || rank == 0 ? 1 : product(a + 1, rank);
  return true;
}

/// How the threads of a block share rows: a warp per short contiguous row,
/// a whole block per long one, and, when the row is strided (inner > 1), a
/// column of 8 threads per row with 32 neighbouring rows side by side so
/// that loads stay coalesced along inner.
enum class RowLayoutKind { Warp, Block256, Block1024, Column };

/// Rows up to this long take a warp; each lane then loops at most 16 times.
constexpr int64_t kWarpRowMax = 512;
/// Rows up to this long take 256 threads, longer ones 1024.
constexpr int64_t kBlock256RowMax = 4096;
/// Column layout: rows side by side (threadIdx.x) and threads per row.
constexpr int kColumnRows = 32;
constexpr int kColumnThreads = 8;
/// Warps per block in the warp layout.
constexpr int kWarpsPerBlock = 8;
/// Blocks beyond which grid-stride loops take over (132 SMs x 16).
constexpr int64_t kMaxRowBlocks = 132 * 16;

inline RowLayoutKind chooseRowLayout(int64_t d, int64_t inner) {
  if (inner > 1)
    return RowLayoutKind::Column;
  if (d <= kWarpRowMax)
    return RowLayoutKind::Warp;
  return d <= kBlock256RowMax ? RowLayoutKind::Block256
                              : RowLayoutKind::Block1024;
}

/// Threads per block of a layout.
ZINC_HD constexpr int rowLayoutThreads(RowLayoutKind k) {
  return k == RowLayoutKind::Block1024 ? 1024 : 256;
}

/// Blocks that cover every row once (before grid-stride capping).
inline int64_t rowBlocksNeeded(RowLayoutKind k, const SoftmaxRows &g) {
  switch (k) {
  case RowLayoutKind::Warp:
    return (g.rows() + kWarpsPerBlock - 1) / kWarpsPerBlock;
  case RowLayoutKind::Block256:
  case RowLayoutKind::Block1024:
    return g.rows();
  case RowLayoutKind::Column:
    return g.outer * ((g.inner + kColumnRows - 1) / kColumnRows);
  }
  return 1;
}

/// The grid of a row kernel: one block per row group, capped.
inline int64_t rowBlocks(RowLayoutKind k, const SoftmaxRows &g) {
  int64_t n = rowBlocksNeeded(k, g);
  return n < 1 ? 1 : (n > kMaxRowBlocks ? kMaxRowBlocks : n);
}

/// SoftmaxCrossEntropyLoss with reduction mean or sum: at most this many
/// blocks each sum their positions' losses and weights in a fixed order
/// into the call's scratch, and one block adds those up in a fixed order,
/// so the loss is the same on every run and every GPU. The count depends
/// only on the shape.
constexpr int64_t kLossPartialBlocks = 1024;

inline int64_t lossPartialBlocks(RowLayoutKind k, const SoftmaxRows &g) {
  int64_t n = rowBlocksNeeded(k, g);
  return n < 1 ? 1 : (n > kLossPartialBlocks ? kLossPartialBlocks : n);
}

/// Scratch bytes SoftmaxCrossEntropyLoss (mean or sum) takes: a (loss,
/// weight) pair of doubles per partial block. Without them it runs as one
/// block, correct but slow for large inputs.
inline uint64_t lossScratchBytes(int64_t partialBlocks) {
  return (uint64_t(partialBlocks) * 2 * sizeof(double) + 255) / 256 * 256;
}

/// SoftmaxCrossEntropyLossGrad with reduction mean: every block recomputes
/// the denominator (the total weight of non-ignored targets) rather than
/// passing it through scratch, so the grid is capped to keep that
/// recomputation (blocks x positions target reads) well below the main work.
inline int64_t meanGradBlocks(int64_t blocks, int64_t positions) {
  int64_t cap = (int64_t(1) << 26) / (positions > 0 ? positions : 1);
  if (cap < 132)
    cap = 132;
  return blocks < cap ? blocks : cap;
}

//===----------------------------------------------------------------------===//
// Indexing
//===----------------------------------------------------------------------===//

/// Offset of element 0 of row r in [outer, d, inner]; element j is at
/// rowBase + j * inner.
ZINC_HD int64_t rowBase(int64_t r, int64_t d, int64_t inner) {
  return (r / inner) * d * inner + r % inner;
}

/// The mask row read by score row r: the mask broadcasts through leading
/// axes only, so it repeats every maskRows rows.
ZINC_HD int64_t maskRowOf(int64_t r, int64_t maskRows) { return r % maskRows; }

//===----------------------------------------------------------------------===//
// Per-element math
//===----------------------------------------------------------------------===//

/// Softmax: exp(x - max) / sum, with inv = 1 / sum rounded to float once.
ZINC_HD float softmaxValue(float x, float max, float inv) {
  return expf(x - max) * inv;
}

/// LogSoftmax: (x - max) - log(sum), in that order as the cpu does it.
ZINC_HD float logSoftmaxValue(float x, float max, float logSum) {
  return (x - max) - logSum;
}

/// MaskedSoftmax's score: masked positions are -inf, so they get no weight.
ZINC_HD float maskedScore(float x, bool masked) {
  return masked ? -INFINITY : x;
}

/// MaskedSoftmax's output. The cpu's f32 path normalises the masked score
/// row as a plain softmax (a fully masked row is 0/0 = NaN); its 16-bit
/// path writes 0 at masked positions (so a fully masked row is all 0):
/// `zeroMasked` picks the latter.
ZINC_HD float maskedSoftmaxValue(float x, bool masked, float max, float inv,
                                 bool zeroMasked) {
  if (masked && zeroMasked)
    return 0.0f;
  return expf(maskedScore(x, masked) - max) * inv;
}

/// The row sum SoftmaxGrad needs from one element: dy * y, or, for
/// LogSoftmaxGrad, dy alone.
ZINC_HD double softmaxGradTerm(float y, float dy, bool isLog) {
  return isLog ? double(dy) : double(dy) * double(y);
}

/// SoftmaxGrad:    dx = y * (dy - s), s = sum(dy * y);
/// LogSoftmaxGrad: dx = dy - exp(y) * s, s = sum(dy).
ZINC_HD float softmaxGradValue(float y, float dy, float s, bool isLog) {
  return isLog ? dy - expf(y) * s : y * (dy - s);
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

/// What a target selects: a class, nothing (ignore_index), or an invalid
/// class. The cpu refuses an out-of-range target before computing; the GPU
/// cannot without waiting for the device, so it makes that position NaN.
enum class TargetKind { Class, Ignored, OutOfRange };

ZINC_HD TargetKind classifyTarget(int64_t t, int64_t classes,
                                  bool hasIgnoreIndex, int64_t ignoreIndex) {
  if (hasIgnoreIndex && t == ignoreIndex)
    return TargetKind::Ignored;
  return t < 0 || t >= classes ? TargetKind::OutOfRange : TargetKind::Class;
}

/// log-sum-exp of a row from its maximum and sum of exp(x - max).
ZINC_HD float logSumExp(float max, double sumExp) {
  return max + static_cast<float>(log(sumExp));
}

/// The loss at one position: -log_prob[t] * w[t].
ZINC_HD float sceLoss(float xTarget, float lse, float weight) {
  return -(xTarget - lse) * weight;
}

/// The gradient coefficient of one position, a = -dloss * w[t] / den (den
/// = 1 unless the reduction is mean), in double as the cpu computes it.
ZINC_HD double sceCoefficient(double dloss, double weight, double den) {
  return -dloss * weight / den;
}

/// dscores at one element: G + a * onehot(t) - softmax * (sum_c G + a),
/// with softmax = exp(x - lse) (lse = 0 when x already is log_prob). G is
/// added only when there is one (`hasG`), as the cpu does, which keeps the
/// sign of a zero.
ZINC_HD float sceGradValue(float x, float lse, float sumG, float g, bool hasG,
                           float coef, bool isTarget) {
  float v = -expf(x - lse) * sumG;
  if (hasG)
    v += g;
  if (isTarget)
    v += coef;
  return v;
}

} // namespace zinc::cuda

#endif
