//===- AttentionOp.h - zinc.Attention's operands, attributes and limits ---===//
//
// zinc.Attention is scaled dot-product attention in one op (fuse-attention
// forms it from what exporters write), computed FlashAttention-style in
// tiles with an online softmax, so that no [Tq, Tk] matrix exists outside
// a tile:
//
//   Attention(Q, Kt, V, mask?, bias?) -> (Y, LSE)
//     {scale, causal, fill, ratio, seed_id}
//   Q [..., Tq, D], Kt [..., D, Tk] (the transposed keys, as the product
//   Q Kt reads them), V [..., Tk, Dv], equal leading axes;
//   score(i, j) = (mask(i, j) ? fill : scale * (Q Kt)(i, j)) + bias(i, j),
//     mask bool and bias float, each broadcasting to [..., Tq, Tk];
//     with causal, every j > i + Tk - Tq is left out (weight exactly 0);
//   P = softmax over j; with ratio > 0 (training Dropout on P, seed_id
//     stamped by build-training), P's element k is kept with the Philox
//     stream of a Dropout on P (support/Philox.h) and scaled by
//     1 / (1 - ratio); Y = P V;
//   LSE [..., Tq], f32 (f64 for f64 data): log sum_j exp(score(i, j)), what
//     the backward needs to rebuild P a tile at a time.
//
//   AttentionGrad(Q, Kt, V, mask?, bias?, Y, LSE, dY) -> (dQ, dKt, dV, dBias?)
//     with the forward's attributes; dBias (bias's shape) only where the
//     bias is trained (T5's relative positions), which needs a bias covering
//     whole [Tq, Tk] matrices.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_SUPPORT_ATTENTIONOP_H
#define ZINC_SUPPORT_ATTENTIONOP_H

#include <cstdint>

namespace zinc::attention {

/// Operand positions of Attention and AttentionGrad.
enum Input : unsigned { kQ = 0, kKt = 1, kV = 2, kMask = 3, kBias = 4 };
enum GradInput : unsigned { kY = 5, kLse = 6, kDy = 7 };
enum GradOutput : unsigned { kDq = 0, kDkt = 1, kDv = 2, kDbias = 3 };

/// The largest head dimension (D and Dv) the kernels take: their tiles of
/// Q, dY and the accumulators live in registers, shared memory or the
/// stack, sized for it. fuse-attention leaves wider heads unfused.
constexpr int64_t kMaxHeadDim = 256;

} // namespace zinc::attention

#endif
