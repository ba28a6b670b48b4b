//===- Rotary.cpp - Gradient rule of zinc.Rotary (rotary embeddings) ------===//
//
// y = x cos + rotate_half(x) sin (from fuse-rotary). x's gradient is one
// zinc.RotaryGrad(dy, cos, sin). The tables are constants in the models
// exported today; when one is trained, its gradient is the product with
// the other factor summed over what it was broadcast along, rotate_half(x)
// being zinc.Rotary with cos 0 and sin 1.
//
//===----------------------------------------------------------------------===//
#include "Rules.h"

namespace zinc::autodiff {

llvm::Error gradRotary(GradientBuilder &b) {
  ir::Value *x = b.input(0), *cos = b.input(1), *sin = b.input(2);
  ir::Value *dy = b.outputGrad(0);
  TensorType type{x->dtype, x->shape};
  if (b.needsGrad(0))
    if (auto err = b.setGrad(0, b.zincOp("RotaryGrad", {dy, cos, sin}, type)))
      return err;
  if (b.needsGrad(1))
    if (auto err = b.setGrad(1, b.sumToShape(b.mul(dy, x), cos->shape)))
      return err;
  if (b.needsGrad(2)) {
    ir::Value *rotated = b.zincOp(
        "Rotary", {x, b.scalar(0.0, x->dtype), b.scalar(1.0, x->dtype)}, type);
    if (auto err = b.setGrad(2, b.sumToShape(b.mul(dy, rotated), sin->shape)))
      return err;
  }
  return llvm::Error::success();
}

} // namespace zinc::autodiff
