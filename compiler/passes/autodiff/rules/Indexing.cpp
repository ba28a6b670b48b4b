//===- Indexing.cpp - Gradient rules of Pad, Tile, CumSum, gathers, scatters -===//
//
// Pad's gradient adds each output gradient back to the element it was read
// from (zinc.PadGrad, one kernel for every mode). Tile's is a sum over the
// copies, CumSum's the same scan run the other way, and a scatter's the
// gradient with the overwritten places zeroed; all three stay ONNX ops.
//
//===----------------------------------------------------------------------===//
#include "RuleUtil.h"
#include "Rules.h"
#include "zinc/support/Error.h"

namespace zinc::autodiff {

/// zinc.PadGrad(dy, pads, axes?) {mode, shape}. The pads (and axes) must be
/// the same every step, as for Slice; a trained constant_value is refused.
llvm::Error gradPad(GradientBuilder &b) {
  ir::Value *x = b.input(0);
  if (b.numInputs() > 2 && b.input(2) && b.needsGrad(2))
    return makeError("unsupported: gradient of Pad with respect to its "
                     "constant_value '" +
                     b.input(2)->name + "'");
  if (!b.needsGrad(0))
    return llvm::Error::success();
  llvm::SmallVector<ir::Value *, 3> operands{b.outputGrad(0)};
  if (b.opset() < 11)
    operands.push_back(b.int64s(b.attrs().getInts("pads")));
  for (unsigned i : {1u, 3u}) {
    if (b.opset() < 11)
      break;
    ir::Value *v = i < b.numInputs() ? b.input(i) : nullptr;
    if (v && !isConstantOperand(v))
      return makeError(llvm::Twine("unsupported: gradient of Pad with "
                                   "non-constant ") +
                       (i == 1 ? "pads" : "axes") + " '" + v->name +
                       "' (it must be a Constant node or an initializer)");
    if (v)
      operands.push_back(v);
  }
  AttributeList attrs;
  attrs.set(makeStringAttr("mode", b.attrs().getString("mode", "constant")));
  attrs.set(makeIntsAttr("shape", x->shape));
  return b.setGrad(0, b.zincOp("PadGrad", operands, {x->dtype, x->shape},
                               std::move(attrs)));
}

/// y = tile(x, r): dy viewed as [r0, s0, r1, s1, ...] summed over the r
/// axes. The repeats follow from the shapes, so they need not be read.
llvm::Error gradTile(GradientBuilder &b) {
  ir::Value *x = b.input(0), *dy = b.outputGrad(0);
  llvm::SmallVector<int64_t, 8> split, axes;
  bool repeated = false;
  for (size_t d = 0; d < x->shape.size(); ++d) {
    int64_t in = x->shape[d], out = dy->shape[d];
    int64_t r = in == 0 ? 1 : out / in;
    repeated |= r != 1;
    axes.push_back(split.size());
    split.push_back(r);
    split.push_back(in);
  }
  if (!repeated)
    return b.setGrad(0, dy);
  ir::Value *sum = b.reduceSum(b.reshape(dy, split), axes, /*keepDims=*/false);
  return b.setGrad(0, sum->shape == x->shape ? sum : b.reshape(sum, x->shape));
}

/// The gradient of a running sum is the running sum of the gradient taken
/// from the other end, exclusive where the forward was.
llvm::Error gradCumSum(GradientBuilder &b) {
  ir::Value *x = b.input(0);
  AttributeList attrs;
  attrs.set(makeIntAttr("exclusive", b.attrs().getInt("exclusive", 0)));
  attrs.set(makeIntAttr("reverse", b.attrs().getInt("reverse", 0) == 0));
  return b.setGrad(0, b.op("CumSum", {b.outputGrad(0), b.input(1)},
                           {x->dtype, x->shape}, std::move(attrs)));
}

/// data's gradient is dy with the scattered places zeroed: the same scatter
/// of zeros. The updates' gradient (a gather of dy) is not built.
static llvm::Error gradScatter(GradientBuilder &b) {
  ir::Value *data = b.input(0), *updates = b.input(2);
  llvm::StringRef reduction = b.attrs().getString("reduction", "none");
  if (reduction != "none")
    return makeError("unsupported: gradient of " + b.node().opType +
                     " with reduction '" + reduction + "'");
  if (b.needsGrad(2))
    return makeError("unsupported: gradient of " + b.node().opType +
                     " with respect to its updates '" + updates->name + "'");
  if (!b.needsGrad(0))
    return llvm::Error::success();
  ir::Value *none = zeros(b, updates->dtype, updates->shape);
  return b.setGrad(0, b.op(b.node().opType, {b.outputGrad(0), b.input(1), none},
                           {data->dtype, data->shape}, b.attrs()));
}

/// GatherElements' gradient adds dy into zeros at the places it read: a
/// ScatterElements with reduction "add".
llvm::Error gradGatherElements(GradientBuilder &b) {
  ir::Value *data = b.input(0);
  AttributeList attrs;
  attrs.set(makeIntAttr("axis", b.attrs().getInt("axis", 0)));
  attrs.set(makeStringAttr("reduction", "add"));
  ir::Value *none = zeros(b, data->dtype, data->shape);
  return b.setGrad(0, b.op("ScatterElements", {none, b.input(1), b.outputGrad(0)},
                           {data->dtype, data->shape}, std::move(attrs)));
}

llvm::Error gradScatterND(GradientBuilder &b) { return gradScatter(b); }
llvm::Error gradScatterElements(GradientBuilder &b) { return gradScatter(b); }

} // namespace zinc::autodiff
