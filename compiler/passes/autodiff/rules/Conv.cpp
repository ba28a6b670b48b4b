//===- Conv.cpp - Gradient rules of Conv and ConvTranspose ----------------===//
//
// The input and weight gradients are zinc ops (runtime/cpu/kernels/grad/
// ConvGrad.cpp) that carry the forward node's attributes unchanged, so that
// strides, pads, dilations, groups and auto_pad are resolved by the same
// geometry code the forward kernel uses; the shape of the gradient they
// produce is the forward operand's. The bias gradient is a ReduceSum of dY
// over the batch and spatial axes.
//
//===----------------------------------------------------------------------===//
#include "Rules.h"

namespace zinc::autodiff {

/// dB = sum of dY over N and the spatial axes: [N, M, ...] -> [M].
static ir::Value *biasGrad(GradientBuilder &b, ir::Value *dy) {
  llvm::SmallVector<int64_t, 4> axes{0};
  for (int64_t d = 2; d < static_cast<int64_t>(dy->shape.size()); ++d)
    axes.push_back(d);
  return b.reduceSum(dy, axes, /*keepDims=*/false);
}

/// Conv and ConvTranspose share inputs (X, W, optional B) and differ only in
/// which pair of kernels computes dX and dW.
static llvm::Error gradConvLike(GradientBuilder &b, llvm::StringRef inputGradOp,
                                llvm::StringRef weightGradOp) {
  ir::Value *x = b.input(0), *w = b.input(1), *dy = b.outputGrad(0);
  if (b.needsGrad(0))
    if (auto err = b.setGrad(
            0, b.zincOp(inputGradOp, {dy, w}, {x->dtype, x->shape}, b.attrs())))
      return err;
  if (b.needsGrad(1))
    if (auto err = b.setGrad(1, b.zincOp(weightGradOp, {dy, x},
                                         {w->dtype, w->shape}, b.attrs())))
      return err;
  if (b.needsGrad(2))
    return b.setGrad(2, b.reshape(biasGrad(b, dy), b.input(2)->shape));
  return llvm::Error::success();
}

llvm::Error gradConv(GradientBuilder &b) {
  return gradConvLike(b, "ConvGradInput", "ConvGradWeight");
}

llvm::Error gradConvTranspose(GradientBuilder &b) {
  return gradConvLike(b, "ConvTransposeGradInput", "ConvTransposeGradWeight");
}

} // namespace zinc::autodiff
