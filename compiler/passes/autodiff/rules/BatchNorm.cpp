//===- BatchNorm.cpp - Gradient rules of BatchNormalization ---------------===//
//
// Training mode (training_mode=1) normalises with the batch statistics; its
// gradient is one fused zinc op (gradTrainingBatchNorm below). Inference
// mode normalises with mean and var as given:
//   Y = (X - mean) * inv * scale + B,   inv = 1 / sqrt(var + epsilon),
// an affine map per channel whose gradients are plain ONNX ops. mean and var
// are differentiable inputs of that formula and get their true gradients;
// PyTorch keeps them as buffers, and a user freezes them with --freeze.
//
//===----------------------------------------------------------------------===//
#include "Rules.h"
#include "zinc/support/Error.h"

namespace zinc::autodiff {

/// zinc.BatchNormalizationGrad(dy, x, scale, [mean, invstd]) -> dx, dscale,
/// dbias: the batch mean and variance depend on x, so dx is not the affine
/// map's. The running statistics (inputs 3, 4) are model state and get no
/// gradient; the batch statistics build-training added as outputs 3 and 4
/// are reused when they are at least as wide as x.
static llvm::Error gradTrainingBatchNorm(GradientBuilder &b) {
  for (unsigned i = 1; i < b.node().outputs.size(); ++i)
    if (b.outputGrad(i))
      return makeError("unsupported: gradient flowing into output " +
                       llvm::Twine(i) +
                       " (a running or batch statistic) of BatchNormalization "
                       "in training mode");
  if (b.needsGrad(3) || b.needsGrad(4))
    return makeError("unsupported: gradient of the running statistics of "
                     "BatchNormalization in training mode");
  ir::Value *x = b.input(0), *scale = b.input(1), *bias = b.input(2);
  llvm::SmallVector<ir::Value *, 5> operands{b.outputGrad(0), x, scale};
  ir::Value *mean = b.output(3), *invStd = b.output(4);
  auto wideEnough = [&](const ir::Value *v) {
    return v && dtypeSize(v->dtype) >= dtypeSize(x->dtype);
  };
  if (wideEnough(mean) && wideEnough(invStd)) {
    operands.push_back(mean);
    operands.push_back(invStd);
  }
  AttributeList attrs;
  attrs.set(makeFloatAttr("epsilon", b.attrs().getFloat("epsilon", 1e-5)));
  llvm::SmallVector<ir::Value *, 4> grads =
      b.ops("BatchNormalizationGrad", operands,
            {{x->dtype, x->shape},
             {scale->dtype, scale->shape},
             {bias->dtype, bias->shape}},
            std::move(attrs), "zinc");
  for (unsigned i = 0; i < 3; ++i)
    if (b.needsGrad(i))
      if (auto err = b.setGrad(i, grads[i]))
        return err;
  return llvm::Error::success();
}

llvm::Error gradBatchNormalization(GradientBuilder &b) {
  const ir::Node &n = b.node();
  if (b.attrs().getInt("training_mode", 0) != 0)
    return gradTrainingBatchNorm(b);
  if (n.outputs.size() > 1)
    return makeError("unsupported: the gradient of BatchNormalization with "
                     "more than one output outside training mode");
  ir::Value *x = b.input(0), *dy = b.outputGrad(0);
  int64_t rank = x->shape.size();
  DType dt = x->dtype;
  // Before opset 9, spatial=0 gives every activation its own statistics:
  // parameters [C, D1, ...] instead of [C].
  bool perActivation = b.opset() < 9 && b.attrs().getInt("spatial", 1) == 0;
  // Parameters as broadcastable against X (leading N left out), and the axes
  // their gradients sum over.
  llvm::SmallVector<int64_t, 4> paramShape, axes{0};
  for (int64_t d = 1; d < rank; ++d) {
    paramShape.push_back(d == 1 || perActivation ? x->shape[d] : 1);
    if (d >= 2 && !perActivation)
      axes.push_back(d);
  }
  auto param = [&](unsigned i) {
    return b.reshape(b.cast(b.input(i), dt), paramShape);
  };
  // Sums come out [1, C, 1...] (or [1, C, D...]); each gradient goes back
  // to its parameter's own shape and type.
  auto setParamGrad = [&](unsigned i, ir::Value *g) {
    ir::Value *in = b.input(i);
    return b.setGrad(i, b.cast(b.reshape(g, in->shape), in->dtype));
  };

  ir::Value *scale = param(1), *var = param(4);
  double epsilon = b.attrs().getFloat("epsilon", 1e-5);
  ir::Value *inv =
      b.unary("Reciprocal", b.unary("Sqrt", b.add(var, b.scalar(epsilon, dt))));
  ir::Value *scaleInv = b.mul(scale, inv);

  if (b.needsGrad(0))
    if (auto err = b.setGrad(0, b.mul(dy, scaleInv)))
      return err;
  if (b.needsGrad(2) || b.needsGrad(3)) {
    ir::Value *sumDy = b.reduceSum(dy, axes, /*keepDims=*/true);
    if (b.needsGrad(2))
      if (auto err = setParamGrad(2, sumDy))
        return err;
    if (b.needsGrad(3))
      if (auto err = setParamGrad(3, b.neg(b.mul(sumDy, scaleInv))))
        return err;
  }
  if (b.needsGrad(1) || b.needsGrad(4)) {
    ir::Value *centered = b.sub(x, param(3));
    ir::Value *sumDyXc = b.reduceSum(b.mul(dy, centered), axes, true);
    if (b.needsGrad(1))
      if (auto err = setParamGrad(1, b.mul(sumDyXc, inv)))
        return err;
    // d inv / d var = -inv^3 / 2.
    if (b.needsGrad(4)) {
      ir::Value *inv3 = b.mul(b.mul(inv, inv), inv);
      ir::Value *g =
          b.mul(b.mul(sumDyXc, scale), b.mul(inv3, b.scalar(-0.5, dt)));
      if (auto err = setParamGrad(4, g))
        return err;
    }
  }
  return llvm::Error::success();
}

} // namespace zinc::autodiff
