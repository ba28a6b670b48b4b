//===- DeviceTypes.cuh - Element types of device tensors, in kernels ------===//
//
// Loads widen to float and stores round to nearest even, as the cpu kernels
// do for f16 and bf16; `dispatchFloat` picks the kernel instantiation for a
// tensor's dtype on the host.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_CUDA_KERNELS_DEVICETYPES_CUH
#define ZINC_RUNTIME_CUDA_KERNELS_DEVICETYPES_CUH

#include "zinc/runtime/cuda/CudaKernel.h"
#include "zinc/support/DType.h"
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace zinc::cuda {

__device__ __forceinline__ float loadF(float v) { return v; }
__device__ __forceinline__ float loadF(__half v) { return __half2float(v); }
__device__ __forceinline__ float loadF(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

template <typename T> __device__ __forceinline__ T storeF(float v);
template <> __device__ __forceinline__ float storeF<float>(float v) {
  return v;
}
template <> __device__ __forceinline__ __half storeF<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 storeF<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

/// Calls fn(T{}) with T the device type of `dtype` (float, __half,
/// __nv_bfloat16); an error naming `op` for any other type.
template <typename Fn>
llvm::Error dispatchFloat(DType dtype, llvm::StringRef op, Fn &&fn) {
  switch (dtype) {
  case DType::F32:
    return fn(float{});
  case DType::F16:
    return fn(__half{});
  case DType::BF16:
    return fn(__nv_bfloat16{});
  default:
    return cudaKernelError("unsupported: " + op + " of " + dtypeName(dtype) +
                           " on the cuda backend (f32, f16, bf16)");
  }
}

} // namespace zinc::cuda

#endif
