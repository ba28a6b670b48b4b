//===- GradientBuilder.cpp - Emitting backward nodes with static shapes ---===//
#include "zinc/passes/autodiff/GradientBuilder.h"
#include "zinc/support/Error.h"
#include "zinc/support/Float16.h"
#include <cassert>
#include <cstring>

namespace zinc::autodiff {

GradientBuilder::GradientBuilder(ir::Graph &g, const ir::Node &fwd,
                                 llvm::ArrayRef<ir::Value *> outputGrads,
                                 llvm::ArrayRef<bool> inputNeedsGrad)
    : g(g), fwd(fwd), outGrads(outputGrads.begin(), outputGrads.end()),
      needs(inputNeedsGrad.begin(), inputNeedsGrad.end()),
      grads(fwd.inputs.size(), nullptr) {}

ir::Value *GradientBuilder::input(unsigned i) const {
  return i < fwd.inputs.size() ? fwd.inputs[i] : nullptr;
}
ir::Value *GradientBuilder::output(unsigned i) const {
  return i < fwd.outputs.size() ? fwd.outputs[i] : nullptr;
}
ir::Value *GradientBuilder::outputGrad(unsigned i) const {
  return i < outGrads.size() ? outGrads[i] : nullptr;
}
bool GradientBuilder::needsGrad(unsigned i) const {
  return i < needs.size() && needs[i];
}

llvm::Error GradientBuilder::setGrad(unsigned i, ir::Value *grad) {
  ir::Value *in = input(i);
  if (!in || !grad)
    return makeError("gradient rule set a gradient for missing input " +
                     llvm::Twine(i));
  if (grad->dtype != in->dtype || grad->shape != in->shape)
    return makeError("gradient rule gave input " + llvm::Twine(i) + " a gradient of type " +
                     dtypeName(grad->dtype) + formatShape(grad->shape) + ", expected " +
                     dtypeName(in->dtype) + formatShape(in->shape));
  grads[i] = grad;
  return llvm::Error::success();
}

std::string GradientBuilder::freshNodeName(llvm::StringRef opType) {
  return g.uniqueNodeName(
      (fwd.name + "/grad/" + opType + "_" + llvm::Twine(counter++)).str());
}

llvm::SmallVector<ir::Value *, 4>
GradientBuilder::ops(llvm::StringRef opType, llvm::ArrayRef<ir::Value *> inputs,
                     llvm::ArrayRef<TensorType> types, AttributeList attrs,
                     llvm::StringRef domain) {
  std::string nodeName = freshNodeName(opType);
  llvm::SmallVector<ir::Value *, 4> outs;
  for (const TensorType &t : types)
    outs.push_back(g.addValue(g.uniqueValueName(nodeName), t.dtype, t.shape,
                              ir::ValueRole::Activation));
  g.addNode(opType, nodeName, inputs, outs, std::move(attrs), domain);
  return outs;
}

ir::Value *GradientBuilder::op(llvm::StringRef opType,
                               llvm::ArrayRef<ir::Value *> inputs,
                               const TensorType &type, AttributeList attrs,
                               llvm::StringRef domain) {
  return ops(opType, inputs, {type}, std::move(attrs), domain)[0];
}

ir::Value *GradientBuilder::zincOp(llvm::StringRef opType,
                                   llvm::ArrayRef<ir::Value *> inputs,
                                   const TensorType &type, AttributeList attrs) {
  return op(opType, inputs, type, std::move(attrs), "zinc");
}

/// The bytes of `value` stored as `dtype`.
static std::vector<uint8_t> encodeScalar(double value, DType dtype) {
  std::vector<uint8_t> bytes(dtypeSize(dtype));
  auto put = [&](auto v) { std::memcpy(bytes.data(), &v, sizeof(v)); };
  switch (dtype) {
  case DType::F32: put(static_cast<float>(value)); break;
  case DType::F64: put(value); break;
  case DType::F16: put(floatToHalf(static_cast<float>(value))); break;
  case DType::BF16: put(floatToBf16(static_cast<float>(value))); break;
  case DType::I8: put(static_cast<int8_t>(value)); break;
  case DType::I16: put(static_cast<int16_t>(value)); break;
  case DType::I32: put(static_cast<int32_t>(value)); break;
  case DType::I64: put(static_cast<int64_t>(value)); break;
  case DType::U8: put(static_cast<uint8_t>(value)); break;
  case DType::U16: put(static_cast<uint16_t>(value)); break;
  case DType::U32: put(static_cast<uint32_t>(value)); break;
  case DType::U64: put(static_cast<uint64_t>(value)); break;
  case DType::Bool: put(static_cast<uint8_t>(value != 0)); break;
  }
  return bytes;
}

ir::Value *GradientBuilder::scalar(double value, DType dtype) {
  TensorData t;
  t.dtype = dtype;
  t.bytes = encodeScalar(value, dtype);
  AttributeList attrs;
  attrs.set(makeTensorAttr("value", std::move(t)));
  return op("Constant", {}, {dtype, {}}, std::move(attrs));
}

ir::Value *GradientBuilder::int64s(llvm::ArrayRef<int64_t> values) {
  TensorData t;
  t.dtype = DType::I64;
  t.shape = {static_cast<int64_t>(values.size())};
  t.bytes.resize(values.size() * 8);
  if (!values.empty())
    std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  AttributeList attrs;
  attrs.set(makeTensorAttr("value", std::move(t)));
  return op("Constant", {}, {DType::I64, {static_cast<int64_t>(values.size())}},
            std::move(attrs));
}

llvm::SmallVector<int64_t, 4> GradientBuilder::broadcast(llvm::ArrayRef<int64_t> a,
                                                         llvm::ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  llvm::SmallVector<int64_t, 4> out(rank, 1);
  for (size_t d = 0; d < rank; ++d) {
    int64_t da = d < rank - a.size() ? 1 : a[d - (rank - a.size())];
    int64_t db = d < rank - b.size() ? 1 : b[d - (rank - b.size())];
    assert((da == db || da == 1 || db == 1) && "shapes do not broadcast");
    out[d] = da == 1 ? db : da;
  }
  return out;
}

static ir::Value *binary(GradientBuilder &b, llvm::StringRef opType, ir::Value *x,
                         ir::Value *y) {
  return b.op(opType, {x, y}, {x->dtype, GradientBuilder::broadcast(x->shape, y->shape)});
}

ir::Value *GradientBuilder::add(ir::Value *a, ir::Value *b) { return binary(*this, "Add", a, b); }
ir::Value *GradientBuilder::sub(ir::Value *a, ir::Value *b) { return binary(*this, "Sub", a, b); }
ir::Value *GradientBuilder::mul(ir::Value *a, ir::Value *b) { return binary(*this, "Mul", a, b); }
ir::Value *GradientBuilder::div(ir::Value *a, ir::Value *b) { return binary(*this, "Div", a, b); }
ir::Value *GradientBuilder::neg(ir::Value *a) { return unary("Neg", a); }

ir::Value *GradientBuilder::unary(llvm::StringRef opType, ir::Value *a) {
  return op(opType, {a}, {a->dtype, a->shape});
}

ir::Value *GradientBuilder::reshape(ir::Value *a, llvm::ArrayRef<int64_t> shape) {
  if (llvm::ArrayRef<int64_t>(a->shape) == shape)
    return a;
  return op("Reshape", {a, int64s(shape)}, {a->dtype, {shape.begin(), shape.end()}});
}

ir::Value *GradientBuilder::transpose(ir::Value *a, llvm::ArrayRef<int64_t> perm) {
  llvm::SmallVector<int64_t, 4> shape;
  for (int64_t p : perm)
    shape.push_back(a->shape[p]);
  AttributeList attrs;
  attrs.set(makeIntsAttr("perm", perm));
  return op("Transpose", {a}, {a->dtype, shape}, std::move(attrs));
}

ir::Value *GradientBuilder::reduceSum(ir::Value *a, llvm::ArrayRef<int64_t> axes,
                                      bool keepDims) {
  if (axes.empty())
    return a;
  llvm::SmallVector<int64_t, 4> shape;
  for (int64_t d = 0; d < static_cast<int64_t>(a->shape.size()); ++d) {
    bool reduced = llvm::is_contained(axes, d);
    if (!reduced)
      shape.push_back(a->shape[d]);
    else if (keepDims)
      shape.push_back(1);
  }
  AttributeList attrs;
  attrs.set(makeIntAttr("keepdims", keepDims ? 1 : 0));
  // ReduceSum took its axes as an attribute until opset 13.
  if (opset() >= 13)
    return op("ReduceSum", {a, int64s(axes)}, {a->dtype, shape}, std::move(attrs));
  attrs.set(makeIntsAttr("axes", axes));
  return op("ReduceSum", {a}, {a->dtype, shape}, std::move(attrs));
}

ir::Value *GradientBuilder::sumToShape(ir::Value *grad, llvm::ArrayRef<int64_t> shape) {
  if (llvm::ArrayRef<int64_t>(grad->shape) == shape)
    return grad;
  int64_t rank = grad->shape.size();
  int64_t lead = rank - static_cast<int64_t>(shape.size());
  llvm::SmallVector<int64_t, 4> axes;
  for (int64_t d = 0; d < rank; ++d)
    if (d < lead || (shape[d - lead] == 1 && grad->shape[d] != 1))
      axes.push_back(d);
  return reshape(reduceSum(grad, axes, /*keepDims=*/true), shape);
}

ir::Value *GradientBuilder::cast(ir::Value *a, DType to) {
  if (a->dtype == to)
    return a;
  AttributeList attrs;
  attrs.set(makeIntAttr("to", static_cast<int64_t>(to)));
  return op("Cast", {a}, {to, a->shape}, std::move(attrs));
}

} // namespace zinc::autodiff
