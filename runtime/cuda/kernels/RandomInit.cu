//===- RandomInit.cu - --init=random's values made in device memory -------===//
//
// One thread per element: a parameter in the GPU tier is generated where it
// lives, so a from-scratch run copies none of it over PCIe and keeps no host
// copy of it.
//
//===----------------------------------------------------------------------===//
#include "DeviceTypes.cuh"
#include "RandomInitKernel.h"
#include "zinc/runtime/cuda/CudaCheck.h"

namespace zinc::cuda {
namespace {

template <typename T>
__global__ void randomInitKernel(T *dst, uint64_t elements, DeviceFillKind kind,
                                 uint64_t key, RandomInitIndexMap map,
                                 uint64_t seed) {
  uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < elements; i += stride) {
    uint64_t e = 0;
    float v = 0.0f;
    if (randomInitElement(map, i, e)) {
      if (kind == DeviceFillKind::One)
        v = 1.0f;
      else if (kind == DeviceFillKind::Normal)
        v = randomInitNormal(randomInitBlock(seed, key, e / 4),
                             static_cast<unsigned>(e % 4), kRandomInitStd);
    }
    dst[i] = storeF<T>(v);
  }
}

} // namespace

llvm::Error queueRandomInit(void *dst, DType dtype, uint64_t elements,
                            DeviceFillKind kind, uint64_t key,
                            const RandomInitIndexMap &map, uint64_t seed,
                            cudaStream_t stream) {
  if (!elements)
    return llvm::Error::success();
  constexpr unsigned threads = 256;
  // Enough blocks to fill any GPU; the grid-stride loop covers the rest.
  uint64_t blocks = std::min<uint64_t>((elements + threads - 1) / threads, 65535);
  return dispatchFloat(dtype, "--init=random", [&](auto zero) -> llvm::Error {
    using T = decltype(zero);
    randomInitKernel<T><<<static_cast<unsigned>(blocks), threads, 0, stream>>>(
        static_cast<T *>(dst), elements, kind, key, map, seed);
    return checkLaunch("randomInitKernel");
  });
}

} // namespace zinc::cuda
