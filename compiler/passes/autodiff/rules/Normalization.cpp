//===- Normalization.cpp - Softmax, LogSoftmax, LayerNorm gradients -------===//
//
// Each becomes one fused zinc op: the row statistics these gradients need
// (sum(dy*y), sum(dy), the mean and variance of a LayerNorm row) are long
// reductions that a chain of ONNX ops would compute in the model's dtype and
// with several passes over memory.
//
//===----------------------------------------------------------------------===//
#include "Rules.h"
#include "zinc/support/Error.h"
#include <algorithm>

namespace zinc::autodiff {

/// Before opset 13 Softmax and LogSoftmax flatten the input to 2-D at `axis`
/// (default 1) and normalise over everything from `axis` on; from 13 they
/// normalise along `axis` alone (default -1). The gradient op carries the
/// non-negative axis and which form (`flatten`), so its kernel does not
/// depend on the model's opset.
static llvm::Error gradSoftmaxFamily(GradientBuilder &b,
                                     llvm::StringRef gradOp) {
  ir::Value *x = b.input(0);
  bool flatten = b.opset() < 13;
  int64_t rank = x->shape.size();
  int64_t axis = b.attrs().getInt("axis", flatten ? 1 : -1);
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis >= std::max<int64_t>(rank, 1))
    return makeError("axis " + llvm::Twine(b.attrs().getInt("axis", 0)) +
                     " is out of range for rank " + llvm::Twine(rank));
  AttributeList attrs;
  attrs.set(makeIntAttr("axis", axis));
  attrs.set(makeIntAttr("flatten", flatten ? 1 : 0));
  ir::Value *dx = b.zincOp(gradOp, {b.output(0), b.outputGrad(0)},
                           {x->dtype, x->shape}, std::move(attrs));
  return b.setGrad(0, dx);
}

/// dx = y * (dy - sum(dy * y)).
llvm::Error gradSoftmax(GradientBuilder &b) {
  return gradSoftmaxFamily(b, "SoftmaxGrad");
}

/// dx = dy - exp(y) * sum(dy).
llvm::Error gradLogSoftmax(GradientBuilder &b) {
  return gradSoftmaxFamily(b, "LogSoftmaxGrad");
}

/// zinc.LayerNormalizationGrad(dy, x, scale, [mean, invstd]) -> dx, dscale,
/// [dbias], with the forward node's attributes (axis, epsilon). The kernel
/// recomputes the statistics from x when they are not given.
llvm::Error gradLayerNormalization(GradientBuilder &b) {
  if (b.outputGrad(1) || b.outputGrad(2))
    return makeError("unsupported: gradient flowing into the Mean or "
                     "InvStdDev output of LayerNormalization");
  ir::Value *x = b.input(0), *scale = b.input(1), *bias = b.input(2);
  ir::Value *mean = b.output(1), *invStd = b.output(2);
  llvm::SmallVector<ir::Value *, 5> operands{b.outputGrad(0), x, scale};
  // The statistics are stored in stash_type (float32 by default, the only
  // choice besides bfloat16): reusing them for a double model would cost
  // half its digits, so they are used only when at least as wide as x.
  auto wideEnough = [&](const ir::Value *v) {
    return v && dtypeSize(v->dtype) >= dtypeSize(x->dtype);
  };
  if (wideEnough(mean) && wideEnough(invStd)) {
    operands.push_back(mean);
    operands.push_back(invStd);
  }
  llvm::SmallVector<TensorType, 3> types{{x->dtype, x->shape},
                                         {scale->dtype, scale->shape}};
  if (bias)
    types.push_back({bias->dtype, bias->shape});
  llvm::SmallVector<ir::Value *, 4> grads =
      b.ops("LayerNormalizationGrad", operands, types, b.attrs(), "zinc");
  for (unsigned i = 0; i < grads.size(); ++i)
    if (b.needsGrad(i))
      if (auto err = b.setGrad(i, grads[i]))
        return err;
  return llvm::Error::success();
}

/// zinc.RmsNorm (from fuse-rms-norm): dx = zinc.RmsNormGrad(x, dy).
llvm::Error gradRmsNorm(GradientBuilder &b) {
  ir::Value *x = b.input(0);
  AttributeList attrs;
  attrs.set(makeFloatAttr("epsilon", b.attrs().getFloat("epsilon", 1e-6)));
  return b.setGrad(0, b.zincOp("RmsNormGrad", {x, b.outputGrad(0)},
                               {x->dtype, x->shape}, std::move(attrs)));
}

} // namespace zinc::autodiff
