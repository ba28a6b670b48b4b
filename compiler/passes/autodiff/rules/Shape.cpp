//===- Shape.cpp - Gradient rules of ops that only change the shape -------===//
//
// Reshape, Flatten, Squeeze and Unsqueeze keep the elements in order, so
// the gradient is the output gradient reshaped back; their shape and axes
// operands are integers and never need one. Expand broadcasts, so its
// gradient is summed back over the broadcast axes.
//
//===----------------------------------------------------------------------===//
#include "Rules.h"

namespace zinc::autodiff {

static llvm::Error reshapeBack(GradientBuilder &b) {
  return b.setGrad(0, b.reshape(b.outputGrad(0), b.input(0)->shape));
}

llvm::Error gradReshape(GradientBuilder &b) { return reshapeBack(b); }
llvm::Error gradFlatten(GradientBuilder &b) { return reshapeBack(b); }
llvm::Error gradSqueeze(GradientBuilder &b) { return reshapeBack(b); }
llvm::Error gradUnsqueeze(GradientBuilder &b) { return reshapeBack(b); }

llvm::Error gradExpand(GradientBuilder &b) {
  return b.setGrad(0, b.sumToShape(b.outputGrad(0), b.input(0)->shape));
}

} // namespace zinc::autodiff
