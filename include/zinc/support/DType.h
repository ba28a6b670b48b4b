//===- DType.h - Element types shared by the compiler and the runtime -----===//
#ifndef ZINC_SUPPORT_DTYPE_H
#define ZINC_SUPPORT_DTYPE_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/Optional.h"
#include "llvm/ADT/StringRef.h"
#include <cstddef>
#include <cstdint>
#include <string>

namespace zinc {

/// Element types zinc can hold. The numeric values are ONNX's
/// TensorProto::DataType codes, so conversion at the frontend is a cast.
enum class DType : uint8_t {
  F32 = 1,
  U8 = 2,
  I8 = 3,
  U16 = 4,
  I16 = 5,
  I32 = 6,
  I64 = 7,
  Bool = 9,
  F16 = 10,
  F64 = 11,
  U32 = 12,
  U64 = 13,
  BF16 = 16,
};

/// Bytes per element.
size_t dtypeSize(DType t);
/// Short name used by the IR text form and diagnostics: f32, bf16, i64, bool...
llvm::StringRef dtypeName(DType t);
/// Inverse of dtypeName.
llvm::Optional<DType> parseDTypeName(llvm::StringRef name);
/// Maps an ONNX TensorProto::DataType code; None for types zinc cannot hold
/// (string, complex, float8).
llvm::Optional<DType> dtypeFromOnnx(int onnxCode);
bool isFloatDType(DType t);
bool isIntegerDType(DType t);
bool isSignedDType(DType t);

/// A set of element types, as the ops table states what an op accepts.
class DTypeSet {
public:
  constexpr DTypeSet() = default;
  constexpr explicit DTypeSet(uint32_t bits) : bits(bits) {}
  constexpr bool contains(DType t) const {
    return bits & (1u << static_cast<unsigned>(t));
  }
  constexpr DTypeSet operator|(DTypeSet o) const { return DTypeSet(bits | o.bits); }
  static constexpr DTypeSet of(DType t) {
    return DTypeSet(1u << static_cast<unsigned>(t));
  }

private:
  uint32_t bits = 0;
};

namespace dtypes {
constexpr DTypeSet Float = DTypeSet::of(DType::F32) | DTypeSet::of(DType::F64) |
                           DTypeSet::of(DType::F16) | DTypeSet::of(DType::BF16);
constexpr DTypeSet Int =
    DTypeSet::of(DType::I8) | DTypeSet::of(DType::I16) |
    DTypeSet::of(DType::I32) | DTypeSet::of(DType::I64) |
    DTypeSet::of(DType::U8) | DTypeSet::of(DType::U16) |
    DTypeSet::of(DType::U32) | DTypeSet::of(DType::U64);
constexpr DTypeSet Numeric = Float | Int;
constexpr DTypeSet All = Numeric | DTypeSet::of(DType::Bool);
constexpr DTypeSet Bool = DTypeSet::of(DType::Bool);
} // namespace dtypes

/// Number of elements of a shape (1 for a scalar); INT64_MAX when the
/// product does not fit (shapes the frontend accepts always fit: see
/// kMaxTensorBytes).
int64_t numElements(llvm::ArrayRef<int64_t> shape);

/// The largest tensor zinc plans for: 2^60 bytes (an exabyte), so that byte
/// counts, offsets and their sums stay far inside 64 bits.
constexpr uint64_t kMaxTensorBytes = uint64_t(1) << 60;

/// The bytes of a tensor of `shape` with elements of `elementBytes` bytes,
/// every product checked for overflow: None for a negative dimension or a
/// size past kMaxTensorBytes. The one place a size read from a file (a
/// model, a plan, a safetensors header) becomes a byte count.
llvm::Optional<uint64_t> tensorBytes(llvm::ArrayRef<int64_t> shape,
                                     uint64_t elementBytes);
/// Whether a tensor of `shape` (no negative dimension) and elements of
/// `elementBytes` bytes stays within kMaxTensorBytes.
bool fitsTensorBytes(llvm::ArrayRef<int64_t> shape, uint64_t elementBytes);
/// "[2,3,4]"
std::string formatShape(llvm::ArrayRef<int64_t> shape);

} // namespace zinc

#endif
