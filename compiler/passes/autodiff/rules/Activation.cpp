//===- Activation.cpp - Gradient rules of unary math, activations, Where --===//
//
// Derivatives that are one multiply stay ONNX ops (Exp, Log, Sqrt,
// Reciprocal); activations whose derivative is a chain of several ops get
// one fused zinc kernel each (runtime/cpu/kernels/grad/ElementwiseGrad.cpp),
// reading the forward output where that is cheaper than the input (Tanh,
// Sigmoid). Where the derivative is undefined (Relu at 0) the value follows
// PyTorch.
//
//===----------------------------------------------------------------------===//
#include "RuleUtil.h"
#include "Rules.h"
#include "zinc/support/Error.h"

namespace zinc::autodiff {

/// dx = zinc.<opType>(operand, dy), with the input's type.
static llvm::Error setFused(GradientBuilder &b, llvm::StringRef opType,
                            ir::Value *operand, AttributeList attrs = {}) {
  ir::Value *x = b.input(0);
  return b.setGrad(0, b.zincOp(opType, {operand, b.outputGrad(0)},
                               {x->dtype, x->shape}, std::move(attrs)));
}

/// y = a ^ e, both broadcasting:
///   da = dy * e * a^(e-1)
///   de = dy * y * log(a) where a > 0, else 0 (log is undefined there;
///        PyTorch gives NaN for a < 0 and 0 for a == 0).
llvm::Error gradPow(GradientBuilder &b) {
  ir::Value *a = b.input(0), *e = b.input(1), *y = b.output(0);
  ir::Value *dy = b.outputGrad(0);
  if (b.needsGrad(0)) {
    // An integer exponent stays integer for a^(e-1): Pow accepts mixed types.
    ir::Value *eMinus1 = b.sub(e, b.scalar(1.0, e->dtype));
    ir::Value *pow =
        b.op("Pow", {a, eMinus1},
             {a->dtype, GradientBuilder::broadcast(a->shape, e->shape)});
    ir::Value *da = b.mul(b.mul(dy, pow), b.cast(e, a->dtype));
    if (auto err = b.setGrad(0, b.sumToShape(da, a->shape)))
      return err;
  }
  if (b.needsGrad(1)) {
    // Only a float exponent can need a gradient; a is cast to its type.
    ir::Value *base = b.cast(a, e->dtype);
    ir::Value *zero = b.scalar(0.0, e->dtype);
    ir::Value *positive =
        b.op("Greater", {base, zero}, {DType::Bool, base->shape});
    // log of the non-positive entries is replaced before it is taken, so
    // no NaN reaches the multiply.
    ir::Value *safe = b.op("Where", {positive, base, b.scalar(1.0, e->dtype)},
                           {e->dtype, base->shape});
    ir::Value *logA = b.unary("Log", safe);
    ir::Value *yLog = b.mul(b.cast(b.mul(dy, y), e->dtype), logA);
    ir::Value *de =
        b.op("Where", {positive, yLog, zero}, {e->dtype, yLog->shape});
    if (auto err = b.setGrad(1, b.sumToShape(de, e->shape)))
      return err;
  }
  return llvm::Error::success();
}

/// y = sqrt(x): dx = dy / (2 y).
llvm::Error gradSqrt(GradientBuilder &b) {
  ir::Value *y = b.output(0);
  ir::Value *half = b.mul(b.outputGrad(0), b.scalar(0.5, y->dtype));
  return b.setGrad(0, b.div(half, y));
}

/// y = 1 / x: dx = -dy * y^2.
llvm::Error gradReciprocal(GradientBuilder &b) {
  ir::Value *y = b.output(0);
  return b.setGrad(0, b.neg(b.mul(b.outputGrad(0), b.mul(y, y))));
}

/// y = exp(x): dx = dy * y.
llvm::Error gradExp(GradientBuilder &b) {
  return b.setGrad(0, b.mul(b.outputGrad(0), b.output(0)));
}

/// y = log(x): dx = dy / x.
llvm::Error gradLog(GradientBuilder &b) {
  return b.setGrad(0, b.div(b.outputGrad(0), b.input(0)));
}

llvm::Error gradErf(GradientBuilder &b) {
  return setFused(b, "ErfGrad", b.input(0));
}

llvm::Error gradTanh(GradientBuilder &b) {
  return setFused(b, "TanhGrad", b.output(0));
}

llvm::Error gradSigmoid(GradientBuilder &b) {
  return setFused(b, "SigmoidGrad", b.output(0));
}

llvm::Error gradRelu(GradientBuilder &b) {
  return setFused(b, "ReluGrad", b.input(0));
}

llvm::Error gradSilu(GradientBuilder &b) {
  return setFused(b, "SiluGrad", b.input(0));
}

/// zinc.SwiGlu(gate, up) = silu(gate) up (from fuse-swiglu): both
/// gradients from one zinc.SwiGluGrad(gate, up, dy); where only one operand
/// needs a gradient, that one alone.
llvm::Error gradSwiGlu(GradientBuilder &b) {
  ir::Value *gate = b.input(0), *up = b.input(1), *dy = b.outputGrad(0);
  TensorType type{gate->dtype, gate->shape};
  if (b.needsGrad(0) && b.needsGrad(1)) {
    auto grads = b.ops("SwiGluGrad", {gate, up, dy}, {type, type}, {}, "zinc");
    if (auto err = b.setGrad(0, grads[0]))
      return err;
    return b.setGrad(1, grads[1]);
  }
  if (b.needsGrad(0))
    return b.setGrad(0, b.zincOp("SiluGrad", {gate, b.mul(dy, up)}, type));
  if (b.needsGrad(1))
    return b.setGrad(1, b.mul(dy, b.zincOp("Silu", {gate}, type)));
  return llvm::Error::success();
}

llvm::Error gradHardSigmoid(GradientBuilder &b) {
  AttributeList attrs;
  attrs.set(makeFloatAttr("alpha", b.attrs().getFloat("alpha", 0.2)));
  attrs.set(makeFloatAttr("beta", b.attrs().getFloat("beta", 0.5)));
  return setFused(b, "HardSigmoidGrad", b.input(0), std::move(attrs));
}

llvm::Error gradHardSwish(GradientBuilder &b) {
  return setFused(b, "HardSwishGrad", b.input(0));
}

llvm::Error gradLeakyRelu(GradientBuilder &b) {
  AttributeList attrs;
  attrs.set(makeFloatAttr("alpha", b.attrs().getFloat("alpha", 0.01)));
  return setFused(b, "LeakyReluGrad", b.input(0), std::move(attrs));
}

/// y = clip(x, min, max): dx = dy where min < x < max, else 0 (the fused
/// ClipGrad; see its kernel for why the bounds are strict). Before opset 11
/// the bounds are attributes and become Constants here. A bound that itself
/// needs a gradient (a trained clamp limit) is refused: PyTorch's exports
/// clip with constant bounds.
llvm::Error gradClip(GradientBuilder &b) {
  ir::Value *x = b.input(0);
  for (unsigned i : {1u, 2u})
    if (i < b.numInputs() && b.input(i) && b.needsGrad(i))
      return makeError(llvm::Twine("unsupported: gradient of Clip with "
                                   "respect to its ") +
                       (i == 1 ? "min" : "max") + " input");
  if (!b.needsGrad(0))
    return llvm::Error::success();
  ir::Value *lo = nullptr, *hi = nullptr;
  if (b.opset() < 11) {
    if (b.attrs().has("min"))
      lo = b.scalar(b.attrs().getFloat("min", 0), x->dtype);
    if (b.attrs().has("max"))
      hi = b.scalar(b.attrs().getFloat("max", 0), x->dtype);
  } else {
    lo = b.numInputs() > 1 ? b.input(1) : nullptr;
    hi = b.numInputs() > 2 ? b.input(2) : nullptr;
  }
  llvm::SmallVector<ir::Value *, 4> operands = {x, b.outputGrad(0), lo, hi};
  while (!operands.back())
    operands.pop_back();
  return b.setGrad(0, b.zincOp("ClipGrad", operands, {x->dtype, x->shape}));
}

llvm::Error gradGelu(GradientBuilder &b) {
  llvm::StringRef approx = b.attrs().getString("approximate", "none");
  if (approx != "none" && approx != "tanh")
    return makeError("unsupported: gradient of Gelu with approximate=\"" +
                     approx + "\"");
  AttributeList attrs;
  attrs.set(makeStringAttr("approximate", approx));
  return setFused(b, "GeluGrad", b.input(0), std::move(attrs));
}

/// y = where(c, x1, x2): each branch gets dy where it was chosen, summed
/// back over its broadcast axes; the condition gets none (it is bool).
llvm::Error gradWhere(GradientBuilder &b) {
  ir::Value *cond = b.input(0), *dy = b.outputGrad(0);
  for (unsigned i : {1u, 2u}) {
    if (!b.needsGrad(i))
      continue;
    ir::Value *zero = b.scalar(0.0, dy->dtype);
    ir::Value *masked =
        b.op("Where", {cond, i == 1 ? dy : zero, i == 1 ? zero : dy},
             {dy->dtype, dy->shape});
    if (auto err = b.setGrad(i, b.sumToShape(masked, b.input(i)->shape)))
      return err;
  }
  return llvm::Error::success();
}

/// Only a float input can need a gradient, and the output carries one only
/// when it is float too: the gradient is cast back to the input's type.
llvm::Error gradCast(GradientBuilder &b) {
  return b.setGrad(0, b.cast(b.outputGrad(0), b.input(0)->dtype));
}

/// CastLike is Cast to like's type; like's values never reach the output, so
/// its gradient (when one is asked for) is zero.
llvm::Error gradCastLike(GradientBuilder &b) {
  if (b.needsGrad(0))
    if (auto err = b.setGrad(0, b.cast(b.outputGrad(0), b.input(0)->dtype)))
      return err;
  if (b.needsGrad(1)) {
    ir::Value *like = b.input(1);
    return b.setGrad(1, zeros(b, like->dtype, like->shape));
  }
  return llvm::Error::success();
}

llvm::Error gradIdentity(GradientBuilder &b) {
  return b.setGrad(0, b.outputGrad(0));
}

} // namespace zinc::autodiff
