//===- DType.cpp - Element type names, sizes and ONNX codes ---------------===//
#include "zinc/support/DType.h"
#include "llvm/ADT/STLExtras.h"
#include <algorithm>
#include <cstdint>
#include "llvm/ADT/StringSwitch.h"

namespace zinc {

size_t dtypeSize(DType t) {
  switch (t) {
  case DType::Bool:
  case DType::U8:
  case DType::I8:
    return 1;
  case DType::U16:
  case DType::I16:
  case DType::F16:
  case DType::BF16:
    return 2;
  case DType::F32:
  case DType::I32:
  case DType::U32:
    return 4;
  case DType::F64:
  case DType::I64:
  case DType::U64:
    return 8;
  }
  return 0;
}

llvm::StringRef dtypeName(DType t) {
  switch (t) {
  case DType::F32: return "f32";
  case DType::F64: return "f64";
  case DType::F16: return "f16";
  case DType::BF16: return "bf16";
  case DType::I8: return "i8";
  case DType::I16: return "i16";
  case DType::I32: return "i32";
  case DType::I64: return "i64";
  case DType::U8: return "u8";
  case DType::U16: return "u16";
  case DType::U32: return "u32";
  case DType::U64: return "u64";
  case DType::Bool: return "bool";
  }
  return "?";
}

llvm::Optional<DType> parseDTypeName(llvm::StringRef name) {
  return llvm::StringSwitch<llvm::Optional<DType>>(name)
      .Case("f32", DType::F32)
      .Case("f64", DType::F64)
      .Case("f16", DType::F16)
      .Case("bf16", DType::BF16)
      .Case("i8", DType::I8)
      .Case("i16", DType::I16)
      .Case("i32", DType::I32)
      .Case("i64", DType::I64)
      .Case("u8", DType::U8)
      .Case("u16", DType::U16)
      .Case("u32", DType::U32)
      .Case("u64", DType::U64)
      .Case("bool", DType::Bool)
      .Default(llvm::None);
}

llvm::Optional<DType> dtypeFromOnnx(int code) {
  switch (code) {
  case 1: case 2: case 3: case 4: case 5: case 6: case 7:
  case 9: case 10: case 11: case 12: case 13: case 16:
    return static_cast<DType>(code);
  default:
    return llvm::None;
  }
}

bool isFloatDType(DType t) { return dtypes::Float.contains(t); }
bool isIntegerDType(DType t) { return dtypes::Int.contains(t); }
bool isSignedDType(DType t) {
  return isFloatDType(t) || t == DType::I8 || t == DType::I16 ||
         t == DType::I32 || t == DType::I64;
}

int64_t numElements(llvm::ArrayRef<int64_t> shape) {
  if (llvm::is_contained(shape, 0))
    return 0;
  int64_t n = 1;
  for (int64_t d : shape)
    if (__builtin_mul_overflow(n, d, &n))
      return INT64_MAX;
  return n;
}

llvm::Optional<uint64_t> tensorBytes(llvm::ArrayRef<int64_t> shape,
                                     uint64_t elementBytes) {
  if (llvm::any_of(shape, [](int64_t d) { return d < 0; }))
    return llvm::None;
  if (llvm::is_contained(shape, 0))
    return 0;
  uint64_t bytes = elementBytes;
  for (int64_t d : shape)
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes))
      return llvm::None;
  if (bytes > kMaxTensorBytes)
    return llvm::None;
  return bytes;
}

bool fitsTensorBytes(llvm::ArrayRef<int64_t> shape, uint64_t elementBytes) {
  return tensorBytes(shape, std::max<uint64_t>(elementBytes, 1)).hasValue();
}

std::string formatShape(llvm::ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      s += ",";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

} // namespace zinc
