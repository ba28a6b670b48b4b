//===- Pool.cpp - Gradient rules of MaxPool, AveragePool, GlobalAveragePool //
//
// MaxPool and AveragePool gradients are zinc ops (runtime/cpu/kernels/grad/
// PoolGrad.cpp) carrying the forward attributes, so the windows (pads,
// auto_pad, ceil_mode, dilations) and the divisor (count_include_pad) are
// the forward kernel's own. GlobalAveragePool is a broadcast and a division.
//
//===----------------------------------------------------------------------===//
#include "Rules.h"

namespace zinc::autodiff {

/// Each output gradient goes to its window's first maximum in X (PyTorch's
/// choice on ties). The optional Indices output is an integer: no gradient.
llvm::Error gradMaxPool(GradientBuilder &b) {
  ir::Value *x = b.input(0);
  return b.setGrad(0, b.zincOp("MaxPoolGrad", {b.outputGrad(0), x},
                               {x->dtype, x->shape}, b.attrs()));
}

/// Each output gradient is spread over its window's real inputs, divided by
/// the count the forward divided by.
llvm::Error gradAveragePool(GradientBuilder &b) {
  ir::Value *x = b.input(0);
  return b.setGrad(0, b.zincOp("AveragePoolGrad", {b.outputGrad(0)},
                               {x->dtype, x->shape}, b.attrs()));
}

/// dX = dY [N, C, 1...] broadcast over the spatial axes, / their size.
llvm::Error gradGlobalAveragePool(GradientBuilder &b) {
  ir::Value *x = b.input(0), *dy = b.outputGrad(0);
  int64_t spatial = 1;
  for (size_t d = 2; d < x->shape.size(); ++d)
    spatial *= x->shape[d];
  ir::Value *spread =
      b.op("Expand", {dy, b.int64s(x->shape)}, {x->dtype, x->shape});
  return b.setGrad(
      0, b.div(spread, b.scalar(static_cast<double>(spatial), x->dtype)));
}

} // namespace zinc::autodiff
