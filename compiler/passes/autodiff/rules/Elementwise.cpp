//===- Elementwise.cpp - Gradient rules of broadcasting arithmetic --------===//
//
// Every binary op broadcasts (numpy rules), so each input's gradient is
// summed back over the axes it was broadcast along (sumToShape).
//
//===----------------------------------------------------------------------===//
#include "Rules.h"

namespace zinc::autodiff {

/// Sets input i's gradient to `g` reduced to the input's shape, if needed.
static llvm::Error setReduced(GradientBuilder &b, unsigned i, ir::Value *g) {
  if (!b.needsGrad(i))
    return llvm::Error::success();
  return b.setGrad(i, b.sumToShape(g, b.input(i)->shape));
}

llvm::Error gradAdd(GradientBuilder &b) {
  ir::Value *dy = b.outputGrad(0);
  if (auto err = setReduced(b, 0, dy))
    return err;
  return setReduced(b, 1, dy);
}

llvm::Error gradSub(GradientBuilder &b) {
  ir::Value *dy = b.outputGrad(0);
  if (auto err = setReduced(b, 0, dy))
    return err;
  if (!b.needsGrad(1))
    return llvm::Error::success();
  return setReduced(b, 1, b.neg(dy));
}

llvm::Error gradMul(GradientBuilder &b) {
  ir::Value *dy = b.outputGrad(0);
  if (b.needsGrad(0))
    if (auto err = setReduced(b, 0, b.mul(dy, b.input(1))))
      return err;
  if (b.needsGrad(1))
    return setReduced(b, 1, b.mul(dy, b.input(0)));
  return llvm::Error::success();
}

/// y = a / b: da = dy / b, db = -dy * y / b.
llvm::Error gradDiv(GradientBuilder &b) {
  ir::Value *dy = b.outputGrad(0);
  ir::Value *dyOverB = b.div(dy, b.input(1));
  if (auto err = setReduced(b, 0, dyOverB))
    return err;
  if (!b.needsGrad(1))
    return llvm::Error::success();
  return setReduced(b, 1, b.neg(b.mul(dyOverB, b.output(0))));
}

llvm::Error gradNeg(GradientBuilder &b) {
  return b.setGrad(0, b.neg(b.outputGrad(0)));
}

} // namespace zinc::autodiff
