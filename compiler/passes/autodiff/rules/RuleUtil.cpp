//===- RuleUtil.cpp - What the activation and data-movement rules share ---===//
#include "RuleUtil.h"
#include "zinc/support/Error.h"
#include <cstring>

namespace zinc::autodiff {

llvm::Optional<llvm::SmallVector<int64_t, 4>> constantInts(const ir::Value *v) {
  const ir::Node *def = v ? v->def : nullptr;
  if (!def || def->opType != "Constant" || !def->domain.empty())
    return llvm::None;
  llvm::SmallVector<int64_t, 4> out;
  if (const TensorData *t = def->attrs.getTensor("value")) {
    if (t->dtype == DType::I64) {
      out.resize(t->bytes.size() / 8);
      if (!out.empty())
        std::memcpy(out.data(), t->bytes.data(), out.size() * 8);
      return out;
    }
    if (t->dtype == DType::I32) {
      for (size_t i = 0; i + 4 <= t->bytes.size(); i += 4) {
        int32_t x;
        std::memcpy(&x, t->bytes.data() + i, 4);
        out.push_back(x);
      }
      return out;
    }
    return llvm::None;
  }
  if (const Attribute *a = def->attrs.find("value_ints")) {
    out.assign(a->ints.begin(), a->ints.end());
    return out;
  }
  if (const Attribute *a = def->attrs.find("value_int")) {
    out.push_back(a->i);
    return out;
  }
  return llvm::None;
}

bool isConstantOperand(const ir::Value *v) {
  if (!v)
    return false;
  if (v->def)
    return v->def->opType == "Constant" && v->def->domain.empty();
  return v->init && v->role == ir::ValueRole::Constant;
}

ir::Value *zeros(GradientBuilder &b, DType dtype,
                 llvm::ArrayRef<int64_t> shape) {
  TensorData value;
  value.dtype = dtype;
  value.shape = {1};
  // All-zero bytes are the zero of every dtype.
  value.bytes.assign(dtypeSize(dtype), 0);
  Attribute a;
  a.name = "value";
  a.kind = AttrKind::Tensor;
  a.tensor = std::move(value);
  AttributeList attrs;
  attrs.set(std::move(a));
  return b.op("ConstantOfShape", {b.int64s(shape)},
              {dtype, {shape.begin(), shape.end()}}, std::move(attrs));
}

llvm::Expected<int64_t> normalizeRuleAxis(GradientBuilder &b, int64_t axis,
                                          int64_t rank) {
  if (axis < -rank || axis >= std::max<int64_t>(rank, 1))
    return makeError(b.node().opType + ": axis " + llvm::Twine(axis) +
                     " is out of range for rank " + llvm::Twine(rank));
  return axis < 0 ? axis + rank : axis;
}

} // namespace zinc::autodiff
