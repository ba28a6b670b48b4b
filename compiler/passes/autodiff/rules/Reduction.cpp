//===- Reduction.cpp - Gradient rules of ReduceSum / ReduceMean / Max -----===//
#include "Rules.h"
#include "zinc/support/Error.h"
#include <cstring>

namespace zinc::autodiff {

/// The reduced axes, non-negative and sorted, from the attribute (or, for
/// ReduceSum at opset 13+, the constant axes input). Empty axes reduce all
/// unless noop_with_empty_axes.
static llvm::Expected<llvm::SmallVector<int64_t, 4>> reducedAxes(GradientBuilder &b) {
  int64_t rank = b.input(0)->shape.size();
  llvm::SmallVector<int64_t, 4> axes;
  llvm::ArrayRef<int64_t> attr = b.attrs().getInts("axes");
  axes.assign(attr.begin(), attr.end());
  if (ir::Value *axesInput = b.input(1)) {
    // The axes tensor must be a Constant node's output: its values decide
    // the gradient's shape, which is static.
    const ir::Node *def = axesInput->def;
    const TensorData *t = def && def->opType == "Constant" ? def->attrs.getTensor("value") : nullptr;
    if (!t || t->dtype != DType::I64)
      return makeError("unsupported: the gradient of " + b.node().opType +
                       " needs constant int64 axes");
    axes.resize(t->bytes.size() / 8);
    std::memcpy(axes.data(), t->bytes.data(), t->bytes.size());
  }
  if (axes.empty() && !b.attrs().getInt("noop_with_empty_axes", 0))
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  for (int64_t &a : axes)
    if (a < 0)
      a += rank;
  llvm::sort(axes);
  return axes;
}

/// `v` (dy by default), of the output's shape, with the reduced axes put
/// back as size 1, broadcast to x's shape.
static llvm::Expected<ir::Value *> expandBack(GradientBuilder &b,
                                              llvm::ArrayRef<int64_t> axes,
                                              ir::Value *v = nullptr) {
  ir::Value *x = b.input(0);
  llvm::SmallVector<int64_t, 4> keptShape(x->shape.begin(), x->shape.end());
  for (int64_t a : axes)
    keptShape[a] = 1;
  ir::Value *dy = b.reshape(v ? v : b.outputGrad(0), keptShape);
  if (llvm::ArrayRef<int64_t>(keptShape) == llvm::ArrayRef<int64_t>(x->shape))
    return dy;
  return b.op("Expand", {dy, b.int64s(x->shape)}, {x->dtype, x->shape});
}

llvm::Error gradReduceSum(GradientBuilder &b) {
  auto axes = reducedAxes(b);
  if (!axes)
    return axes.takeError();
  auto dx = expandBack(b, *axes);
  if (!dx)
    return dx.takeError();
  return b.setGrad(0, *dx);
}

llvm::Error gradReduceMean(GradientBuilder &b) {
  auto axes = reducedAxes(b);
  if (!axes)
    return axes.takeError();
  int64_t count = 1;
  for (int64_t a : *axes)
    count *= b.input(0)->shape[a];
  auto dx = expandBack(b, *axes);
  if (!dx)
    return dx.takeError();
  return b.setGrad(0, b.div(*dx, b.scalar(static_cast<double>(count), b.input(0)->dtype)));
}

/// y = sqrt(sum x^2): dx = x dy / y, and 0 where y is 0 (PyTorch's
/// norm_backward).
llvm::Error gradReduceL2(GradientBuilder &b) {
  auto axes = reducedAxes(b);
  if (!axes)
    return axes.takeError();
  ir::Value *x = b.input(0), *y = b.output(0);
  ir::Value *zero = b.scalar(0.0, y->dtype);
  ir::Value *isZero = b.op("Equal", {y, zero}, {DType::Bool, y->shape});
  ir::Value *ratio = b.op("Where", {isZero, zero, b.div(b.outputGrad(0), y)},
                          {y->dtype, y->shape});
  auto spread = expandBack(b, *axes, ratio);
  if (!spread)
    return spread.takeError();
  return b.setGrad(0, b.mul(*spread, x));
}

} // namespace zinc::autodiff
