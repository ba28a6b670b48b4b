//===- CalibrationKernels.h - The kernels zinc-run --calibrate times ------===//
#ifndef ZINC_RUNTIME_CUDA_KERNELS_CALIBRATIONKERNELS_H
#define ZINC_RUNTIME_CUDA_KERNELS_CALIBRATIONKERNELS_H

#include "zinc/support/DType.h"
#include "llvm/Support/Error.h"
#include <cstdint>
#include <cuda_runtime_api.h>

namespace zinc::cuda {

/// Queues `count` empty kernels (one thread each) on `stream`: what a
/// launch costs with no work.
llvm::Error launchEmptyKernels(int count, cudaStream_t stream);

/// Fills `n` elements of `dtype` (f32, f16 or bf16) at `x` with values in
/// [-1, 1) hashed from each index and `seed`: data that is not zeros, so
/// that timed products run at the rate real values get.
llvm::Error fillPattern(DType dtype, void *x, uint64_t n, uint32_t seed,
                        cudaStream_t stream);

} // namespace zinc::cuda

#endif
