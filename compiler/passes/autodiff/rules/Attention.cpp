//===- Attention.cpp - Gradient rule of zinc.Attention --------------------===//
//
// One zinc.AttentionGrad gives dQ, dKt and dV (and dBias where the bias is
// trained) from the forward's operands, its output Y and its per-row
// log-sum-exp: the backward rebuilds the probabilities a tile at a time, so
// nothing of size [Tq, Tk] is kept between forward and backward. The mask
// is bool and gets no gradient.
//
//===----------------------------------------------------------------------===//
#include "RuleUtil.h"
#include "Rules.h"
#include "zinc/support/AttentionOp.h"

namespace zinc::autodiff {
using namespace zinc::attention;

llvm::Error gradAttention(GradientBuilder &b) {
  ir::Value *dy = b.outputGrad(0);
  ir::Value *lse = b.output(1);
  if (!dy || !lse) {
    // Nothing reaches Y: every gradient is zero.
    for (unsigned i : {kQ, kKt, kV, kBias})
      if (b.input(i) && b.needsGrad(i))
        if (auto err = b.setGrad(i, zeros(b, b.input(i)->dtype, b.input(i)->shape)))
          return err;
    return llvm::Error::success();
  }
  ir::Value *bias = b.input(kBias);
  bool biasGrad = bias && b.needsGrad(kBias);
  llvm::SmallVector<ir::Value *, 8> operands{b.input(kQ), b.input(kKt), b.input(kV),
                                             b.input(kMask), bias, b.output(0), lse, dy};
  llvm::SmallVector<TensorType, 4> types;
  for (unsigned i : {kQ, kKt, kV})
    types.push_back({b.input(i)->dtype, b.input(i)->shape});
  if (biasGrad)
    types.push_back({bias->dtype, bias->shape});
  llvm::SmallVector<ir::Value *, 4> grads =
      b.ops("AttentionGrad", operands, types, b.attrs(), "zinc");
  for (unsigned i : {kQ, kKt, kV})
    if (b.needsGrad(i))
      if (auto err = b.setGrad(i, grads[i]))
        return err;
  if (biasGrad)
    return b.setGrad(kBias, grads[kDbias]);
  return llvm::Error::success();
}

} // namespace zinc::autodiff
