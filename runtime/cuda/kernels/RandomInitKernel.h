//===- RandomInitKernel.h - --init=random's values made in device memory --===//
#ifndef ZINC_RUNTIME_CUDA_KERNELS_RANDOMINITKERNEL_H
#define ZINC_RUNTIME_CUDA_KERNELS_RANDOMINITKERNEL_H

#include "zinc/support/DType.h"
#include "zinc/support/RandomInit.h"
#include "llvm/Support/Error.h"
#include <cstdint>
#include <cuda_runtime_api.h>

namespace zinc::cuda {

/// What the kernel writes (rt::RandomFillKind without Model).
enum class DeviceFillKind : uint8_t { Normal, Zero, One };

/// Queues on `stream`: the `elements` elements of `dtype` at device address
/// `dst` := --init=random's values of the initializer keyed `key` under
/// `seed` (zinc/support/RandomInit.h: the cpu loader's formula, evaluated
/// with the device's logf/sinf/cosf), element i being whole-initializer
/// element `map`(i). Float dtypes only; an error names any other.
llvm::Error queueRandomInit(void *dst, DType dtype, uint64_t elements,
                            DeviceFillKind kind, uint64_t key,
                            const RandomInitIndexMap &map, uint64_t seed,
                            cudaStream_t stream);

} // namespace zinc::cuda

#endif
