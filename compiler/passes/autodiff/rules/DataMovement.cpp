//===- DataMovement.cpp - Gradient rules of ops that move elements --------===//
//
// Transpose, Concat, Split and Trilu are undone by their own inverse (or,
// for Trilu, the same mask). Slice and Gather are undone by scattering the
// gradient into zeros (zinc.SliceGrad, zinc.GatherGrad, which adds up
// repeated indices), ReduceMax by routing it to the maxima
// (zinc.ReduceMaxGrad); their kernels are in
// runtime/cpu/kernels/grad/DataMovementGrad.cpp. Gemm is here because its
// gradient is two Gemms with the transposes folded into the attributes.
//
//===----------------------------------------------------------------------===//
#include "RuleUtil.h"
#include "Rules.h"
#include "zinc/support/Error.h"

namespace zinc::autodiff {

llvm::Error gradTranspose(GradientBuilder &b) {
  int64_t rank = b.input(0)->shape.size();
  llvm::SmallVector<int64_t, 4> perm;
  if (b.attrs().has("perm")) {
    llvm::ArrayRef<int64_t> p = b.attrs().getInts("perm");
    perm.assign(p.begin(), p.end());
  } else {
    for (int64_t d = rank; d-- > 0;)
      perm.push_back(d);
  }
  llvm::SmallVector<int64_t, 4> inverse(rank, 0);
  for (int64_t d = 0; d < rank; ++d)
    inverse[perm[d]] = d;
  return b.setGrad(0, b.transpose(b.outputGrad(0), inverse));
}

/// Split of `v` along `axis` into parts of `sizes`, in the opset's form:
/// the sizes are an input from opset 13, an attribute before.
static llvm::SmallVector<ir::Value *, 4> split(GradientBuilder &b, ir::Value *v,
                                               int64_t axis,
                                               llvm::ArrayRef<int64_t> sizes) {
  llvm::SmallVector<TensorType, 4> types;
  for (int64_t s : sizes) {
    TensorType t{v->dtype, v->shape};
    t.shape[axis] = s;
    types.push_back(t);
  }
  AttributeList attrs;
  attrs.set(makeIntAttr("axis", axis));
  if (b.opset() >= 13)
    return b.ops("Split", {v, b.int64s(sizes)}, types, std::move(attrs));
  attrs.set(makeIntsAttr("split", sizes));
  return b.ops("Split", {v}, types, std::move(attrs));
}

llvm::Error gradConcat(GradientBuilder &b) {
  ir::Value *dy = b.outputGrad(0);
  auto axis =
      normalizeRuleAxis(b, b.attrs().getInt("axis", 0), dy->shape.size());
  if (!axis)
    return axis.takeError();
  llvm::SmallVector<int64_t, 4> sizes;
  for (unsigned i = 0; i < b.numInputs(); ++i)
    sizes.push_back(b.input(i)->shape[*axis]);
  llvm::SmallVector<ir::Value *, 4> parts = split(b, dy, *axis, sizes);
  for (unsigned i = 0; i < b.numInputs(); ++i)
    if (b.needsGrad(i))
      if (auto err = b.setGrad(i, parts[i]))
        return err;
  return llvm::Error::success();
}

/// The output gradients concatenated back; an output no gradient reached
/// contributes zeros of its shape.
llvm::Error gradSplit(GradientBuilder &b) {
  ir::Value *x = b.input(0);
  auto axis =
      normalizeRuleAxis(b, b.attrs().getInt("axis", 0), x->shape.size());
  if (!axis)
    return axis.takeError();
  llvm::SmallVector<ir::Value *, 4> parts;
  for (unsigned i = 0; i < b.node().outputs.size(); ++i) {
    ir::Value *out = b.output(i);
    if (!out)
      return makeError("unsupported: gradient of Split with output " +
                       llvm::Twine(i) + " not requested");
    ir::Value *g = b.outputGrad(i);
    parts.push_back(g ? g : zeros(b, out->dtype, out->shape));
  }
  if (parts.size() == 1)
    return b.setGrad(0, parts[0]);
  AttributeList attrs;
  attrs.set(makeIntAttr("axis", *axis));
  return b.setGrad(
      0, b.op("Concat", parts, {x->dtype, x->shape}, std::move(attrs)));
}

/// zinc.SliceGrad(dy, starts, ends, axes?, steps?) with the input's shape
/// as an attribute. The slice operands are passed on rather than read: an
/// initializer's values are not known to the compiler. They must still be
/// constant, so that every step scatters to the region the forward sliced.
llvm::Error gradSlice(GradientBuilder &b) {
  ir::Value *x = b.input(0);
  llvm::SmallVector<ir::Value *, 5> operands{b.outputGrad(0)};
  if (b.opset() < 10) {
    // Attributes before opset 10, and no steps.
    llvm::ArrayRef<int64_t> starts = b.attrs().getInts("starts");
    operands.push_back(b.int64s(starts));
    operands.push_back(b.int64s(b.attrs().getInts("ends")));
    operands.push_back(
        b.attrs().has("axes") ? b.int64s(b.attrs().getInts("axes")) : nullptr);
  } else {
    static const char *const names[] = {"starts", "ends", "axes", "steps"};
    for (unsigned i = 1; i <= 4; ++i) {
      ir::Value *v = b.input(i);
      if (v && !isConstantOperand(v))
        return makeError(llvm::Twine("unsupported: gradient of Slice with "
                                     "non-constant ") +
                         names[i - 1] + " '" + v->name +
                         "' (it must be a Constant node or an initializer)");
      operands.push_back(v);
    }
  }
  while (!operands.back())
    operands.pop_back();
  AttributeList attrs;
  attrs.set(makeIntsAttr("shape", x->shape));
  return b.setGrad(0, b.zincOp("SliceGrad", operands, {x->dtype, x->shape},
                               std::move(attrs)));
}

/// zinc.GatherGrad(indices, dy): dy's rows added into zeros of the data's
/// shape at the (wrapped) indices along `axis`. Indices get no gradient.
llvm::Error gradGather(GradientBuilder &b) {
  ir::Value *data = b.input(0);
  auto axis =
      normalizeRuleAxis(b, b.attrs().getInt("axis", 0), data->shape.size());
  if (!axis)
    return axis.takeError();
  AttributeList attrs;
  attrs.set(makeIntAttr("axis", *axis));
  attrs.set(makeIntsAttr("shape", data->shape));
  return b.setGrad(0, b.zincOp("GatherGrad", {b.input(1), b.outputGrad(0)},
                               {data->dtype, data->shape}, std::move(attrs)));
}

/// The same triangle of the gradient survives: Trilu with the same k and
/// upper.
llvm::Error gradTrilu(GradientBuilder &b) {
  ir::Value *x = b.input(0);
  AttributeList attrs;
  attrs.set(makeIntAttr("upper", b.attrs().getInt("upper", 1)));
  llvm::SmallVector<ir::Value *, 2> operands{b.outputGrad(0)};
  if (ir::Value *k = b.input(1))
    operands.push_back(k);
  return b.setGrad(
      0, b.op("Trilu", operands, {x->dtype, x->shape}, std::move(attrs)));
}

/// alpha * op(P) op(Q) as a Gemm; before opset 11 C is required, so a zero
/// scalar stands in.
static ir::Value *gemm(GradientBuilder &b, ir::Value *p, bool transP,
                       ir::Value *q, bool transQ, double alpha) {
  int64_t m = transP ? p->shape[1] : p->shape[0];
  int64_t n = transQ ? q->shape[0] : q->shape[1];
  AttributeList attrs;
  attrs.set(makeFloatAttr("alpha", alpha));
  attrs.set(makeIntAttr("transA", transP));
  attrs.set(makeIntAttr("transB", transQ));
  llvm::SmallVector<ir::Value *, 3> operands{p, q};
  if (b.opset() < 11) {
    attrs.set(makeFloatAttr("beta", 0.0));
    operands.push_back(b.scalar(0.0, p->dtype));
    if (b.opset() < 7)
      attrs.set(makeIntAttr("broadcast", 1));
  }
  return b.op("Gemm", operands, {p->dtype, {m, n}}, std::move(attrs));
}

/// Y = alpha * A' B' + beta * C with A' = transA ? A^T : A (B' likewise):
///   dA' = alpha dY B'^T,  dB' = alpha A'^T dY,  dC = beta dY summed to C.
/// Transposing back dA' (dB') swaps the operands, so each is one Gemm.
llvm::Error gradGemm(GradientBuilder &b) {
  ir::Value *A = b.input(0), *B = b.input(1), *C = b.input(2);
  ir::Value *dy = b.outputGrad(0);
  bool transA = b.attrs().getInt("transA", 0) != 0;
  bool transB = b.attrs().getInt("transB", 0) != 0;
  double alpha = b.attrs().getFloat("alpha", 1.0);
  double beta = b.attrs().getFloat("beta", 1.0);
  if (b.needsGrad(0)) {
    ir::Value *dA = transA ? gemm(b, B, transB, dy, true, alpha)
                           : gemm(b, dy, false, B, !transB, alpha);
    if (auto err = b.setGrad(0, dA))
      return err;
  }
  if (b.needsGrad(1)) {
    ir::Value *dB = transB ? gemm(b, dy, true, A, transA, alpha)
                           : gemm(b, A, !transA, dy, false, alpha);
    if (auto err = b.setGrad(1, dB))
      return err;
  }
  if (C && b.needsGrad(2)) {
    ir::Value *dC = beta == 1.0 ? dy : b.mul(dy, b.scalar(beta, dy->dtype));
    if (auto err = b.setGrad(2, b.sumToShape(dC, C->shape)))
      return err;
  }
  return llvm::Error::success();
}

/// The reduced axes of ReduceMax, non-negative: the attribute before opset
/// 18, the axes input (which must be a Constant node: it decides the
/// gradient's shapes) from 18 on. Empty axes reduce everything unless
/// noop_with_empty_axes.
static llvm::Expected<llvm::SmallVector<int64_t, 4>>
reduceMaxAxes(GradientBuilder &b) {
  int64_t rank = b.input(0)->shape.size();
  llvm::SmallVector<int64_t, 4> axes;
  if (b.opset() < 18) {
    llvm::ArrayRef<int64_t> a = b.attrs().getInts("axes");
    axes.assign(a.begin(), a.end());
  } else if (ir::Value *v = b.input(1)) {
    auto values = constantInts(v);
    if (!values)
      return makeError("unsupported: gradient of ReduceMax with non-constant "
                       "axes '" +
                       v->name + "' (it must be a Constant node)");
    axes = *values;
  }
  if (axes.empty()) {
    if (b.attrs().getInt("noop_with_empty_axes", 0))
      return axes;
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  }
  for (int64_t &a : axes) {
    auto n = normalizeRuleAxis(b, a, rank);
    if (!n)
      return n.takeError();
    a = *n;
  }
  return axes;
}

/// The gradient goes to the elements equal to the maximum; ties share it
/// equally, as PyTorch's amax backward does. (x.max(dim) in PyTorch gives
/// it all to the one element its indices name; the even split is what an
/// ONNX ReduceMax says, since it carries no index.)
llvm::Error gradReduceMax(GradientBuilder &b) {
  ir::Value *x = b.input(0);
  auto axes = reduceMaxAxes(b);
  if (!axes)
    return axes.takeError();
  llvm::SmallVector<int64_t, 4> keptShape(x->shape.begin(), x->shape.end());
  for (int64_t a : *axes)
    keptShape[a] = 1;
  ir::Value *y = b.reshape(b.output(0), keptShape);
  ir::Value *dy = b.reshape(b.outputGrad(0), keptShape);
  return b.setGrad(0,
                   b.zincOp("ReduceMaxGrad", {x, y, dy}, {x->dtype, x->shape}));
}

} // namespace zinc::autodiff
