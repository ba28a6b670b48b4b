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

} // namespace zinc

#endif
