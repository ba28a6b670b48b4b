//===- CalibrationKernels.cu - The kernels zinc-run --calibrate times -----===//
#include "CalibrationKernels.h"
#include "zinc/runtime/cuda/CudaCheck.h"
#include "zinc/support/Error.h"
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace zinc::cuda {
namespace {

__global__ void emptyKernel() {}

__device__ inline void storeValue(float *x, uint64_t i, float v) { x[i] = v; }
__device__ inline void storeValue(__half *x, uint64_t i, float v) {
  x[i] = __float2half(v);
}
__device__ inline void storeValue(__nv_bfloat16 *x, uint64_t i, float v) {
  x[i] = __float2bfloat16(v);
}

template <typename T>
__global__ void fillHashed(T *x, uint64_t n, uint32_t seed) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n;
       i += uint64_t(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 16;
    h *= 0x7feb352du;
    h ^= h >> 15;
    storeValue(x, i, static_cast<float>(h >> 8) * (1.0f / 8388608.0f) - 1.0f);
  }
}

} // namespace

llvm::Error launchEmptyKernels(int count, cudaStream_t stream) {
  for (int i = 0; i < count; ++i)
    emptyKernel<<<1, 1, 0, stream>>>();
  return checkLaunch("emptyKernel");
}

llvm::Error fillPattern(DType dtype, void *x, uint64_t n, uint32_t seed,
                        cudaStream_t stream) {
  const unsigned threads = 256, blocks = 1024;
  switch (dtype) {
  case DType::F32:
    fillHashed<<<blocks, threads, 0, stream>>>(static_cast<float *>(x), n,
                                               seed);
    break;
  case DType::F16:
    fillHashed<<<blocks, threads, 0, stream>>>(static_cast<__half *>(x), n,
                                               seed);
    break;
  case DType::BF16:
    fillHashed<<<blocks, threads, 0, stream>>>(static_cast<__nv_bfloat16 *>(x),
                                               n, seed);
    break;
  default:
    return makeError("fillPattern: only f32, f16 and bf16");
  }
  return checkLaunch("fillHashed");
}

} // namespace zinc::cuda
