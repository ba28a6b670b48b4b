//===- ArenaWatermark.cu - The GPU tier's high-water mark, from memory ----===//
//
// At start-up every 32-bit word of the plan's region of the arena is set to
// a sentinel (a NaN pattern no kernel produces by arithmetic, 0x7FBADBAD).
// After a step the highest word that no longer holds it ends the measured
// peak: what the device actually touched, not what the plan says. A write
// of the sentinel's own bit pattern goes unseen, so the measurement can
// only err low by the few words above the last changed one, never high.
//
//===----------------------------------------------------------------------===//
#include "ArenaWatermark.h"
#include "zinc/runtime/cuda/CudaCheck.h"
#include "zinc/runtime/cuda/CudaKernel.h"

namespace zinc::cuda {
namespace {

constexpr unsigned kThreads = 256;

__global__ void fillWords(uint32_t *words, uint64_t n, uint32_t value) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n;
       i += uint64_t(gridDim.x) * blockDim.x)
    words[i] = value;
}

/// *highest = max(*highest, 1 + the index of the highest word in
/// [0, n) that differs from `value`). Each thread keeps its own maximum and
/// one atomic per thread that found any publishes it.
__global__ void highestChangedWord(const uint32_t *words, uint64_t n,
                                   uint32_t value,
                                   unsigned long long *highest) {
  unsigned long long mine = 0;
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n;
       i += uint64_t(gridDim.x) * blockDim.x)
    if (words[i] != value)
      mine = i + 1;
  if (mine)
    atomicMax(highest, mine);
}

} // namespace

llvm::Error fillWithSentinel(void *base, uint64_t bytes, cudaStream_t stream) {
  uint64_t n = bytes / 4;
  if (!n)
    return llvm::Error::success();
  fillWords<<<gridFor(int64_t(n), kThreads), kThreads, 0, stream>>>(
      static_cast<uint32_t *>(base), n, kArenaSentinel);
  return checkLaunch("the arena's sentinel fill");
}

llvm::Error queueHighestChange(const void *base, uint64_t bytes,
                               unsigned long long *highestWord,
                               cudaStream_t stream) {
  uint64_t n = bytes / 4;
  if (!n)
    return llvm::Error::success();
  highestChangedWord<<<gridFor(int64_t(n), kThreads), kThreads, 0, stream>>>(
      static_cast<const uint32_t *>(base), n, kArenaSentinel, highestWord);
  return checkLaunch("the arena's high-water scan");
}

} // namespace zinc::cuda
