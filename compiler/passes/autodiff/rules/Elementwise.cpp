//===- Elementwise.cpp - Gradient rules of broadcasting arithmetic --------===//
//
// Every binary op broadcasts (numpy rules), so each input's gradient is
// summed back over the axes it was broadcast along (sumToShape).
//
//===----------------------------------------------------------------------===//
#include "Rules.h"
#include "zinc/support/Error.h"

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

/// Max and Min of two inputs, as PyTorch's maximum and minimum: the
/// gradient goes to the input that wins, half to each where they tie.
///   w = [a wins] + 0.5 [a == b];  da = dy w,  db = dy (1 - w)
static llvm::Error gradExtremum(GradientBuilder &b, llvm::StringRef wins) {
  if (b.numInputs() == 1)
    return b.setGrad(0, b.outputGrad(0));
  if (b.numInputs() != 2)
    return makeError("unsupported: gradient of " + b.node().opType + " with " +
                     llvm::Twine(b.numInputs()) + " inputs (two at most)");
  ir::Value *a = b.input(0), *c = b.input(1), *dy = b.outputGrad(0);
  llvm::SmallVector<int64_t, 4> shape =
      GradientBuilder::broadcast(a->shape, c->shape);
  ir::Value *win = b.cast(b.op(wins, {a, c}, {DType::Bool, shape}), dy->dtype);
  ir::Value *tie =
      b.cast(b.op("Equal", {a, c}, {DType::Bool, shape}), dy->dtype);
  ir::Value *w = b.add(win, b.mul(tie, b.scalar(0.5, dy->dtype)));
  if (b.needsGrad(0))
    if (auto err = setReduced(b, 0, b.mul(dy, w)))
      return err;
  if (b.needsGrad(1))
    return setReduced(b, 1,
                      b.mul(dy, b.sub(b.scalar(1.0, dy->dtype), w)));
  return llvm::Error::success();
}

llvm::Error gradMax(GradientBuilder &b) { return gradExtremum(b, "Greater"); }
llvm::Error gradMin(GradientBuilder &b) { return gradExtremum(b, "Less"); }

} // namespace zinc::autodiff
