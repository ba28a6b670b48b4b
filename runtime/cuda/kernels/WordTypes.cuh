//===- WordTypes.cuh - Unsigned words that move bytes as one access -------===//
//
// Copy kernels that only move bytes (DataMovement.cu's views,
// GatherColumns.cu's columns) run on the widest word the sizes and
// addresses allow, picked on the host.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_CUDA_KERNELS_WORDTYPES_CUH
#define ZINC_RUNTIME_CUDA_KERNELS_WORDTYPES_CUH

#include <cstdint>
#include <vector_types.h>

namespace zinc::cuda {

/// Calls fn(W{}) with W the word of `bytes` bytes: uint8_t, uint16_t,
/// uint32_t or uint64_t for 1, 2, 4 or 8, and uint4 (16 bytes, one load and
/// one store) for any other size.
template <typename Fn> decltype(auto) withWordType(int64_t bytes, Fn &&fn) {
  switch (bytes) {
  case 1:
    return fn(uint8_t{});
  case 2:
    return fn(uint16_t{});
  case 4:
    return fn(uint32_t{});
  case 8:
    return fn(uint64_t{});
  default:
    return fn(uint4{});
  }
}

} // namespace zinc::cuda

#endif
