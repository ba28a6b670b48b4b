//===- AttentionMath.h - The per-element math and layout of Attention.cu --===//
//
// zinc.Attention's definition is zinc/support/AttentionOp.h. What a kernel
// of Attention.cu computes for one (row i, column j) and how a row's online
// softmax advances, ZINC_HD so that the host tests run the same functions
// over a row, a tile of keys at a time, and compare with the cpu kernel.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_CUDA_KERNELS_ATTENTIONMATH_H
#define ZINC_RUNTIME_CUDA_KERNELS_ATTENTIONMATH_H

#include "HostDevice.h"
#include "zinc/support/Philox.h"
#include <cmath>
#include <cstdint>

namespace zinc::cuda {

/// Where a mask or bias broadcast to [..., Tq, Tk] keeps the element of
/// head h (the flattened leading axes), row i, column j.
struct AttentionOperand {
  static constexpr int kMaxLead = 6;
  int64_t headDims[kMaxLead] = {}, headStrides[kMaxLead] = {};
  int rank = 0;
  int64_t rowStride = 0, colStride = 0;
  bool present = false;

  ZINC_HD int64_t headBase(int64_t h) const {
    int64_t base = 0;
    for (int k = rank - 1; k >= 0; --k) {
      base += (h % headDims[k]) * headStrides[k];
      h /= headDims[k];
    }
    return base;
  }
  ZINC_HD int64_t offset(int64_t base, int64_t i, int64_t j) const {
    return base + i * rowStride + j * colStride;
  }
};

/// The layout of an operand of shape `shape` broadcast to lead + [tq, tk];
/// false when it does not broadcast or has too many leading axes.
inline bool attentionOperand(const int64_t *shape, int rank, const int64_t *lead,
                             int leadRank, int64_t tq, int64_t tk, AttentionOperand &out) {
  int full = leadRank + 2;
  if (rank > full || leadRank > AttentionOperand::kMaxLead)
    return false;
  int64_t strides[AttentionOperand::kMaxLead + 2] = {};
  int64_t stride = 1;
  for (int k = full - 1; k >= 0; --k) {
    int own = k - (full - rank);
    int64_t size = own >= 0 ? shape[own] : 1;
    int64_t want = k < leadRank ? lead[k] : (k == leadRank ? tq : tk);
    if (size != 1 && size != want)
      return false;
    strides[k] = size == 1 ? 0 : stride;
    stride *= size;
  }
  out = AttentionOperand();
  out.present = true;
  out.rank = leadRank;
  for (int k = 0; k < leadRank; ++k) {
    out.headDims[k] = lead[k];
    out.headStrides[k] = strides[k];
  }
  out.rowStride = strides[leadRank];
  out.colStride = strides[leadRank + 1];
  return true;
}

/// The op's sizes and attributes.
struct AttentionParams {
  int64_t heads = 1, tq = 0, tk = 0, d = 0, dv = 0;
  float scale = 1, fill = 0, ratio = 0;
  bool causal = false;
  uint32_t seedId = 0;
  uint64_t seed = 0;
  int64_t step = 0;

  /// Whether causal leaves column j of row i out (weight exactly 0).
  ZINC_HD bool leftOut(int64_t i, int64_t j) const { return causal && j > i + tk - tq; }
  /// The columns [0, end) some row below rowEnd reads.
  ZINC_HD int64_t columnsEnd(int64_t rowEnd) const {
    if (!causal)
      return tk;
    int64_t end = rowEnd + tk - tq;
    return end < 0 ? 0 : end > tk ? tk : end;
  }
  /// The first row that reads column j.
  ZINC_HD int64_t rowsBegin(int64_t j) const {
    if (!causal)
      return 0;
    int64_t begin = j - (tk - tq);
    return begin < 0 ? 0 : begin > tq ? tq : begin;
  }
  /// The score of a product q.k: replaced by the fill where masked, then
  /// biased.
  ZINC_HD float score(float dot, bool masked, float bias) const {
    return (masked ? fill : dot * scale) + bias;
  }
  /// 0 where dropout drops element (h, i, j) of P, 1 / (1 - ratio) where it
  /// keeps it: the stream of a Dropout on [..., Tq, Tk].
  ZINC_HD float keepScale(int64_t h, int64_t i, int64_t j) const {
    if (!(ratio > 0))
      return 1.0f;
    uint64_t index = static_cast<uint64_t>((h * tq + i) * tk + j);
    Philox4x32Counter words = dropoutBlock(seed, step, seedId, index / 4);
    return dropoutKeeps(words.v[index % 4], ratio) ? 1.0f / (1.0f - ratio) : 0.0f;
  }
};

/// exp(s - m), 0 when s is -inf (m is then -inf too for a row left out so
/// far, and exp(NaN) must not be taken).
ZINC_HD float softmaxWeight(float s, float m) {
  return s == -INFINITY ? 0.0f : expf(s - m);
}

/// The factor the running sum and accumulator of a row take when its
/// maximum grows from mOld to mNew: 0 while nothing was seen.
ZINC_HD float softmaxRescale(float mOld, float mNew) {
  return mOld == -INFINITY ? 0.0f : expf(mOld - mNew);
}

} // namespace zinc::cuda

#endif
