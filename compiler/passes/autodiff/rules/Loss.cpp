//===- Loss.cpp - Gradient rules of SoftmaxCrossEntropyLoss and NLL loss --===//
//
// Both are fused zinc ops that carry the forward node's attributes
// (reduction, ignore_index): the gradient is a scatter of -w / denominator
// at the target positions (through a softmax for SoftmaxCrossEntropyLoss),
// where the mean's denominator is the total weight of the non-ignored
// targets, exactly as the forward kernel and PyTorch divide.
//
//===----------------------------------------------------------------------===//
#include "Rules.h"
#include "zinc/support/Error.h"

namespace zinc::autodiff {

/// Labels are integers and never need gradients; the class weights are
/// floats, and a trainable weight tensor is refused rather than silently
/// left untrained.
static llvm::Error refuseWeightGradient(GradientBuilder &b) {
  if (b.needsGrad(2))
    return makeError(
        "unsupported: gradient with respect to the class weights of " +
        b.node().opType);
  return llvm::Error::success();
}

/// Drops absent operands at the end (absent ones in the middle stay null).
static void dropTrailingAbsent(llvm::SmallVectorImpl<ir::Value *> &operands) {
  while (!operands.empty() && !operands.back())
    operands.pop_back();
}

/// zinc.SoftmaxCrossEntropyLossGrad(dloss, log_prob-or-scores, labels,
/// [weights], [dlog_prob]) -> dscores. Input 1 is the forward node's
/// log_prob output when it has one (attribute log_prob=1); otherwise the
/// scores, from which the kernel recomputes the log-softmax. The gradient
/// flowing into log_prob, if any, is added in the same kernel.
llvm::Error gradSoftmaxCrossEntropyLoss(GradientBuilder &b) {
  if (auto err = refuseWeightGradient(b))
    return err;
  if (!b.needsGrad(0))
    return llvm::Error::success();
  ir::Value *scores = b.input(0);
  ir::Value *logProb = b.output(1);
  ir::Value *dLoss = b.outputGrad(0), *dLogProb = b.outputGrad(1);
  TensorType type{scores->dtype, scores->shape};
  if (!dLoss) {
    // Only log_prob is used: its gradient is LogSoftmax's along C.
    AttributeList attrs;
    attrs.set(makeIntAttr("axis", 1));
    attrs.set(makeIntAttr("flatten", 0));
    return b.setGrad(0, b.zincOp("LogSoftmaxGrad", {logProb, dLogProb}, type,
                                 std::move(attrs)));
  }
  AttributeList attrs = b.attrs();
  attrs.set(makeIntAttr("log_prob", logProb ? 1 : 0));
  llvm::SmallVector<ir::Value *, 5> operands{dLoss, logProb ? logProb : scores,
                                             b.input(1), b.input(2), dLogProb};
  dropTrailingAbsent(operands);
  return b.setGrad(0, b.zincOp("SoftmaxCrossEntropyLossGrad", operands, type,
                               std::move(attrs)));
}

/// zinc.NegativeLogLikelihoodLossGrad(dloss, labels, [weights]) -> dinput,
/// its shape the input's.
llvm::Error gradNegativeLogLikelihoodLoss(GradientBuilder &b) {
  if (auto err = refuseWeightGradient(b))
    return err;
  if (!b.needsGrad(0))
    return llvm::Error::success();
  ir::Value *input = b.input(0);
  llvm::SmallVector<ir::Value *, 3> operands{b.outputGrad(0), b.input(1),
                                             b.input(2)};
  dropTrailingAbsent(operands);
  return b.setGrad(0, b.zincOp("NegativeLogLikelihoodLossGrad", operands,
                               {input->dtype, input->shape}, b.attrs()));
}

} // namespace zinc::autodiff
