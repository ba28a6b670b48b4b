//===- ArenaWatermark.h - Measuring the GPU tier's peak from memory -------===//
#ifndef ZINC_RUNTIME_CUDA_KERNELS_ARENAWATERMARK_H
#define ZINC_RUNTIME_CUDA_KERNELS_ARENAWATERMARK_H

#include "llvm/Support/Error.h"
#include <cstdint>
#include <cuda_runtime_api.h>

namespace zinc::cuda {

/// The word every byte of the plan's region holds until something writes it.
constexpr uint32_t kArenaSentinel = 0x7FBADBADu;

/// Queues: every whole 32-bit word of [base, base + bytes) := the sentinel.
llvm::Error fillWithSentinel(void *base, uint64_t bytes, cudaStream_t stream);

/// Queues: *highestWord = max(*highestWord, 1 + index of the highest word of
/// [base, base + bytes) not holding the sentinel), in words from `base`.
llvm::Error queueHighestChange(const void *base, uint64_t bytes,
                               unsigned long long *highestWord,
                               cudaStream_t stream);

} // namespace zinc::cuda

#endif
