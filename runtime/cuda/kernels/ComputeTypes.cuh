//===- ComputeTypes.cuh - Storage and compute types of the misc kernels ---===//
//
// The cpu kernels compute in ComputeT: float for the 16-bit floats, the
// element type itself for f32, f64 and integers. Kernels that take integers
// and f64 as well as the floats DeviceTypes.cuh covers (Clip, ReduceMax)
// convert through these; toCompute runs on the host too, for operands the
// host reads.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_CUDA_KERNELS_COMPUTETYPES_CUH
#define ZINC_RUNTIME_CUDA_KERNELS_COMPUTETYPES_CUH

#include "DeviceTypes.cuh"
#include <cstdint>
#include <limits>
#include <type_traits>

namespace zinc::cuda::misc {

template <typename T>
constexpr bool kIsHalf =
    std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

template <typename T> using ComputeT = std::conditional_t<kIsHalf<T>, float, T>;

template <typename T> __host__ __device__ ComputeT<T> toCompute(T v) {
  if constexpr (std::is_same_v<T, __half>)
    return __half2float(v);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __bfloat162float(v);
  else
    return v;
}

/// Rounds once to the storage type (to nearest even for the 16-bit floats).
template <typename T> __device__ T fromCompute(ComputeT<T> v) {
  if constexpr (kIsHalf<T>)
    return storeF<T>(v);
  else
    return v;
}

/// The ends of C's range, on the host: +-infinity for floats (the unbounded
/// ends of a Clip, the start of a maximum, as the cpu takes them), the
/// type's range for integers.
template <typename C> C lowestValue() {
  if constexpr (std::numeric_limits<C>::has_infinity)
    return -std::numeric_limits<C>::infinity();
  else
    return std::numeric_limits<C>::lowest();
}
template <typename C> C highestValue() {
  if constexpr (std::numeric_limits<C>::has_infinity)
    return std::numeric_limits<C>::infinity();
  else
    return std::numeric_limits<C>::max();
}

} // namespace zinc::cuda::misc

#endif
