//===- Attribute.cpp - Sorted attribute lists with typed getters ----------===//
#include "zinc/support/Attribute.h"
#include "zinc/support/Float16.h"
#include <algorithm>
#include <cstring>

namespace zinc {

llvm::Optional<double> scalarValue(const TensorData &t) {
  if (numElements(t.shape) != 1 || t.bytes.size() != dtypeSize(t.dtype))
    return llvm::None;
  auto as = [&](auto zero) {
    decltype(zero) x;
    std::memcpy(&x, t.bytes.data(), sizeof(x));
    return x;
  };
  switch (t.dtype) {
  case DType::Bool:
    return t.bytes[0] != 0 ? 1.0 : 0.0;
  case DType::F32:
    return static_cast<double>(as(float{}));
  case DType::F64:
    return as(double{});
  case DType::F16:
    return static_cast<double>(halfToFloat(as(uint16_t{})));
  case DType::BF16:
    return static_cast<double>(bf16ToFloat(as(uint16_t{})));
  default:
    return llvm::None;
  }
}

bool Attribute::operator==(const Attribute &o) const {
  return name == o.name && kind == o.kind && i == o.i && f == o.f &&
         s == o.s && ints == o.ints && floats == o.floats &&
         strings == o.strings && tensor == o.tensor;
}

static Attribute named(llvm::StringRef name, AttrKind kind) {
  Attribute a;
  a.name = name.str();
  a.kind = kind;
  return a;
}

Attribute makeIntAttr(llvm::StringRef name, int64_t v) {
  Attribute a = named(name, AttrKind::Int);
  a.i = v;
  return a;
}

Attribute makeIntsAttr(llvm::StringRef name, llvm::ArrayRef<int64_t> v) {
  Attribute a = named(name, AttrKind::Ints);
  a.ints.assign(v.begin(), v.end());
  return a;
}

Attribute makeFloatAttr(llvm::StringRef name, double v) {
  Attribute a = named(name, AttrKind::Float);
  a.f = v;
  return a;
}

Attribute makeStringAttr(llvm::StringRef name, llvm::StringRef v) {
  Attribute a = named(name, AttrKind::String);
  a.s = v.str();
  return a;
}

Attribute makeTensorAttr(llvm::StringRef name, TensorData t) {
  Attribute a = named(name, AttrKind::Tensor);
  a.tensor = std::move(t);
  return a;
}

void AttributeList::set(Attribute a) {
  auto it = std::lower_bound(
      attrs.begin(), attrs.end(), a.name,
      [](const Attribute &x, const std::string &n) { return x.name < n; });
  if (it != attrs.end() && it->name == a.name)
    *it = std::move(a);
  else
    attrs.insert(it, std::move(a));
}

const Attribute *AttributeList::find(llvm::StringRef name) const {
  auto it = std::lower_bound(
      attrs.begin(), attrs.end(), name,
      [](const Attribute &x, llvm::StringRef n) { return x.name < n; });
  return it != attrs.end() && it->name == name ? &*it : nullptr;
}

int64_t AttributeList::getInt(llvm::StringRef name, int64_t dflt) const {
  const Attribute *a = find(name);
  return a && a->kind == AttrKind::Int ? a->i : dflt;
}

double AttributeList::getFloat(llvm::StringRef name, double dflt) const {
  const Attribute *a = find(name);
  return a && a->kind == AttrKind::Float ? a->f : dflt;
}

llvm::StringRef AttributeList::getString(llvm::StringRef name,
                                         llvm::StringRef dflt) const {
  const Attribute *a = find(name);
  return a && a->kind == AttrKind::String ? llvm::StringRef(a->s) : dflt;
}

llvm::ArrayRef<int64_t> AttributeList::getInts(llvm::StringRef name) const {
  const Attribute *a = find(name);
  return a && a->kind == AttrKind::Ints ? llvm::ArrayRef<int64_t>(a->ints)
                                        : llvm::ArrayRef<int64_t>();
}

llvm::ArrayRef<double> AttributeList::getFloats(llvm::StringRef name) const {
  const Attribute *a = find(name);
  return a && a->kind == AttrKind::Floats ? llvm::ArrayRef<double>(a->floats)
                                          : llvm::ArrayRef<double>();
}

const TensorData *AttributeList::getTensor(llvm::StringRef name) const {
  const Attribute *a = find(name);
  return a && a->kind == AttrKind::Tensor ? &a->tensor : nullptr;
}

} // namespace zinc
