//===- KernelUtil.h - Dtype dispatch and broadcasting for cpu kernels -----===//
//
// Every kernel family builds on these, so that a dtype or a broadcasting rule
// is handled in one place.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_CPU_KERNELS_KERNELUTIL_H
#define ZINC_RUNTIME_CPU_KERNELS_KERNELUTIL_H

#include "zinc/runtime/cpu/Kernel.h"
#include "zinc/runtime/cpu/Parallel.h"
#include "zinc/support/Float16.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include <array>
#include <type_traits>

namespace zinc::cpu {

/// The type arithmetic on a storage type happens in: float for the 16-bit
/// floats, the type itself otherwise.
template <typename T> struct ComputeOf { using type = T; };
template <> struct ComputeOf<Half> { using type = float; };
template <> struct ComputeOf<BFloat16> { using type = float; };
template <typename T> using ComputeT = typename ComputeOf<T>::type;

template <typename T> inline ComputeT<T> load(T v) { return v; }
inline float load(Half v) { return halfToFloat(v.bits); }
inline float load(BFloat16 v) { return bf16ToFloat(v.bits); }

/// Converts a computed value back to storage type T (round to nearest even
/// for the 16-bit floats, C++ conversion otherwise).
template <typename T, typename C> inline T store(C v) {
  if constexpr (std::is_same_v<T, Half>)
    return Half{floatToHalf(static_cast<float>(v))};
  else if constexpr (std::is_same_v<T, BFloat16>)
    return BFloat16{floatToBf16(static_cast<float>(v))};
  else
    return static_cast<T>(v);
}

template <typename T> constexpr bool isFloatStorage() {
  return std::is_floating_point_v<T> || std::is_same_v<T, Half> ||
         std::is_same_v<T, BFloat16>;
}

/// Calls fn(T{}) with T the storage type of `t` (Half / BFloat16 for the
/// 16-bit floats). Every DType is covered.
template <typename Fn> decltype(auto) visitDType(DType t, Fn &&fn) {
  switch (t) {
  case DType::F32: return fn(float{});
  case DType::F64: return fn(double{});
  case DType::F16: return fn(Half{});
  case DType::BF16: return fn(BFloat16{});
  case DType::I8: return fn(int8_t{});
  case DType::I16: return fn(int16_t{});
  case DType::I32: return fn(int32_t{});
  case DType::I64: return fn(int64_t{});
  case DType::U8: return fn(uint8_t{});
  case DType::U16: return fn(uint16_t{});
  case DType::U32: return fn(uint32_t{});
  case DType::U64: return fn(uint64_t{});
  case DType::Bool: return fn(bool{});
  }
  return fn(float{});
}

/// Calls fn(E{}) with E an unsigned integer as wide as one element, for
/// kernels that move elements without looking at their values.
template <typename Fn> void visitElementSize(size_t size, Fn &&fn) {
  switch (size) {
  case 1:
    return fn(uint8_t{});
  case 2:
    return fn(uint16_t{});
  case 4:
    return fn(uint32_t{});
  default:
    return fn(uint64_t{});
  }
}

/// Reads element i of an integer tensor (indices, axes, shapes) as int64.
int64_t loadIndex(const TensorRef &t, int64_t i);

/// Row-major strides of a shape, in elements.
llvm::SmallVector<int64_t, 6> contiguousStrides(llvm::ArrayRef<int64_t> shape);

/// Strides to read an input of shape `in` at the indices of an output of
/// shape `out` under numpy broadcasting: 0 along broadcast dimensions.
/// `in` is right-aligned against `out`; the result has out.size() entries.
llvm::SmallVector<int64_t, 6> broadcastStrides(llvm::ArrayRef<int64_t> in,
                                               llvm::ArrayRef<int64_t> out);

/// Numpy broadcast of two shapes; an error if they are incompatible.
llvm::Expected<llvm::SmallVector<int64_t, 6>>
broadcastShapes(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b);

/// Walks every index of `shape` in row-major order while keeping, for each
/// of N operands, a flat offset computed from that operand's strides.
/// Calls fn(offsets) with offsets[k] the current offset of operand k.
template <size_t N, typename Fn>
void forEachStrided(llvm::ArrayRef<int64_t> shape,
                    const std::array<llvm::ArrayRef<int64_t>, N> &strides,
                    Fn &&fn) {
  int64_t total = zinc::numElements(shape);
  if (total == 0)
    return;
  size_t rank = shape.size();
  llvm::SmallVector<int64_t, 6> idx(rank, 0);
  std::array<int64_t, N> off{};
  for (int64_t n = 0; n < total; ++n) {
    fn(off);
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < shape[d]) {
        for (size_t k = 0; k < N; ++k)
          off[k] += strides[k][d];
        break;
      }
      for (size_t k = 0; k < N; ++k)
        off[k] -= strides[k][d] * (shape[d] - 1);
      idx[d] = 0;
    }
  }
}

/// A softmax-family op's view of its input as [outer, d, inner] with the
/// reduction over d: one axis (opset 13+), or everything from `axis` on
/// flattened into d (`flatten`, the form before opset 13).
struct SoftmaxGeometry {
  int64_t outer = 1, d = 1, inner = 1;
};
llvm::Expected<SoftmaxGeometry> softmaxGeometry(llvm::ArrayRef<int64_t> shape,
                                                int64_t axis, bool flatten);

/// Normalises a possibly negative axis against `rank`; an error naming the
/// axis when out of range.
llvm::Expected<int64_t> normalizeAxis(int64_t axis, int64_t rank);

/// Reads every element of an integer tensor (axes, splits, a shape) as int64.
llvm::SmallVector<int64_t, 6> loadIndexList(const TensorRef &t);

/// memcpy that splits large copies across OpenMP threads, since one core
/// cannot saturate memory bandwidth. A no-op when dst == src.
void copyBytes(void *dst, const void *src, size_t bytes);

/// Splits [0, n) into one contiguous range per OpenMP thread and calls
/// fn(begin, end) on each, in parallel only when `workBytes` (the bytes the
/// whole loop touches) is large enough to pay for the threads. For loops
/// that walk an index incrementally and so cannot be a plain `omp for`.
void parallelRanges(int64_t n, size_t workBytes,
                    llvm::function_ref<void(int64_t, int64_t)> fn);

} // namespace zinc::cpu

#endif
