//===- Sharding.h - How ZeRO splits a tensor across ranks -----------------===//
//
// One definition for the compiler (the partition pass, the IR verifier) and
// the runtime (loader, collectives): a tensor of `whole` elements, flattened,
// is padded to ranks * shard elements, and rank r holds [r * shard,
// r * shard + shard); past the tensor's end its shard holds zeros.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_SUPPORT_SHARDING_H
#define ZINC_SUPPORT_SHARDING_H

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace zinc {

/// The most data-parallel ranks a plan may be compiled for.
inline constexpr unsigned kMaxRanks = 1u << 20;

/// Elements of each rank's shard when `whole` elements are split evenly
/// (padded) across `ranks`.
inline int64_t shardElements(int64_t whole, unsigned ranks) {
  return ranks <= 1 ? whole : (whole + ranks - 1) / ranks;
}

/// Elements of `whole` that rank `rank` owns when each holds `shard`:
/// fewer than `shard` (or none) at the end.
inline int64_t ownedElements(int64_t whole, int64_t shard, unsigned rank) {
  return std::clamp<int64_t>(whole - shard * rank, 0, shard);
}

/// Copies rank `rank`'s share of a whole tensor (`wholeElements` elements
/// of `elementBytes` each, at `whole`) into its shard of `shard` elements,
/// zero past the tensor's end: what the loader reads from an initializer
/// and a resume from a checkpoint's whole tensor, whatever rank count wrote it.
inline void copyShardOfWhole(const void *whole, int64_t wholeElements, void *shard,
                             int64_t shardElements, unsigned rank, size_t elementBytes) {
  int64_t owned = ownedElements(wholeElements, shardElements, rank);
  auto *dst = static_cast<uint8_t *>(shard);
  if (owned > 0)
    std::memcpy(dst, static_cast<const uint8_t *>(whole) + shardElements * rank * elementBytes,
                owned * elementBytes);
  std::memset(dst + owned * elementBytes, 0, (shardElements - owned) * elementBytes);
}

} // namespace zinc

#endif
