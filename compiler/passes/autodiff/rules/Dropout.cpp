//===- Dropout.cpp - Gradient rule of Dropout, inference and training -----===//
//
// Inference Dropout is the identity on its data. The training form,
// Dropout(x) {ratio, seed_id}, gives dx = dy * mask / (1 - ratio) through
// zinc.DropoutGrad: by default it regenerates the mask from the forward's
// Philox stream (same run seed, step and seed_id), so no mask is kept
// between forward and backward; where the forward's mask output exists
// (DropoutLowering keeps it only when something reads it) the stored mask
// is used instead.
//
//===----------------------------------------------------------------------===//
#include "RuleUtil.h"
#include "Rules.h"
#include "zinc/passes/DropoutLowering.h"

namespace zinc::autodiff {

llvm::Error gradDropout(GradientBuilder &b) {
  ir::Value *x = b.input(0);
  if (b.needsGrad(0)) {
    ir::Value *dy = b.outputGrad(0);
    ir::Value *dx = nullptr;
    if (!dy) {
      dx = zeros(b, x->dtype, x->shape);
    } else if (passes::isTrainingDropout(b.node())) {
      AttributeList attrs;
      attrs.set(makeFloatAttr("ratio", b.attrs().getFloat("ratio", 0)));
      attrs.set(makeIntAttr("seed_id", b.attrs().getInt("seed_id", 0)));
      llvm::SmallVector<ir::Value *, 2> operands{dy};
      if (ir::Value *mask = b.output(1))
        operands.push_back(mask);
      dx = b.zincOp("DropoutGrad", operands, {x->dtype, x->shape},
                    std::move(attrs));
    } else {
      dx = dy;
    }
    if (auto err = b.setGrad(0, dx))
      return err;
  }
  // The ratio and training_mode inputs (and a float mask before opset 10)
  // get nothing: the mask does not depend on any input.
  for (unsigned i = 1; i < b.numInputs(); ++i)
    if (b.needsGrad(i))
      if (auto err =
              b.setGrad(i, zeros(b, b.input(i)->dtype, b.input(i)->shape)))
        return err;
  return llvm::Error::success();
}

} // namespace zinc::autodiff
