//===- Philox.h - Philox4x32-10 counter-based random numbers --------------===//
//
// Philox4x32-10 (Salmon, Moraes, Dror, Shaw: "Parallel random numbers: as
// easy as 1, 2, 3", SC'11), the generator of cuRAND and of PyTorch's CUDA
// generator: a 128-bit counter and a 64-bit key give four 32-bit words, so
// any element's random number is computed from its coordinates alone, in
// any order, on any backend. Header-only and free of the standard library so
// that cpu kernels and CUDA kernels share one definition.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_SUPPORT_PHILOX_H
#define ZINC_SUPPORT_PHILOX_H

#include <stdint.h>

#if defined(__CUDACC__)
#define ZINC_HOST_DEVICE __host__ __device__
#else
#define ZINC_HOST_DEVICE
#endif

namespace zinc {

struct Philox4x32Counter {
  uint32_t v[4];
};
struct Philox4x32Key {
  uint32_t v[2];
};

namespace philox_detail {
constexpr uint32_t multiplier0 = 0xD2511F53u;
constexpr uint32_t multiplier1 = 0xCD9E8D57u;
constexpr uint32_t weyl0 = 0x9E3779B9u; // golden ratio
constexpr uint32_t weyl1 = 0xBB67AE85u; // sqrt(3) - 1

ZINC_HOST_DEVICE inline void round(Philox4x32Counter &c,
                                   const Philox4x32Key &k) {
  uint64_t p0 = static_cast<uint64_t>(multiplier0) * c.v[0];
  uint64_t p1 = static_cast<uint64_t>(multiplier1) * c.v[2];
  uint32_t hi0 = static_cast<uint32_t>(p0 >> 32),
           lo0 = static_cast<uint32_t>(p0);
  uint32_t hi1 = static_cast<uint32_t>(p1 >> 32),
           lo1 = static_cast<uint32_t>(p1);
  Philox4x32Counter out = {
      {hi1 ^ c.v[1] ^ k.v[0], lo1, hi0 ^ c.v[3] ^ k.v[1], lo0}};
  c = out;
}
} // namespace philox_detail

/// The ten-round Philox4x32 bijection of `counter` under `key`.
ZINC_HOST_DEVICE inline Philox4x32Counter philox4x32(Philox4x32Counter counter,
                                                     Philox4x32Key key) {
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      key.v[0] += philox_detail::weyl0;
      key.v[1] += philox_detail::weyl1;
    }
    philox_detail::round(counter, key);
  }
  return counter;
}

/// A float uniform in [0, 1) from the top 24 bits of `word` (every value is
/// exact in float, and 1 is never reached).
ZINC_HOST_DEVICE inline float uniformFromBits(uint32_t word) {
  return static_cast<float>(word >> 8) * (1.0f / 16777216.0f);
}

/// Dropout's random stream. Element `i` of the node stamped `nodeId`, at
/// training step `step`, under run seed `seed`, reads word i % 4 of
///   philox4x32(counter = {lo32(i / 4), hi32(i / 4), nodeId, lo32(step)},
///              key = {lo32(seed), hi32(seed)}),
/// so masks depend only on (seed, step, node, element): not on the backend,
/// tiling, recomputation or a resume. With several ranks, `i` counts from
/// rank × the tensor's size (the cpu Dropout kernel), so the ranks' masks
/// differ and, the batch outermost, make up the one-rank mask.
ZINC_HOST_DEVICE inline Philox4x32Counter
dropoutBlock(uint64_t seed, int64_t step, uint32_t nodeId, uint64_t block) {
  Philox4x32Counter c = {{static_cast<uint32_t>(block),
                          static_cast<uint32_t>(block >> 32), nodeId,
                          static_cast<uint32_t>(step)}};
  Philox4x32Key k = {
      {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)}};
  return philox4x32(c, k);
}

/// Dropout's keep decision for a word of the stream: uniform u >= ratio, so
/// P(keep) = 1 - ratio (ratio in float, as PyTorch keeps it).
ZINC_HOST_DEVICE inline bool dropoutKeeps(uint32_t word, float ratio) {
  return uniformFromBits(word) >= ratio;
}

} // namespace zinc

#endif
