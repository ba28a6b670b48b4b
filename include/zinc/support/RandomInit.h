//===- RandomInit.h - zinc-run --init=random's values, element by element -===//
//
// `zinc-run --init=random` fills parameters without reading a weights file.
// Every value is a function of (run seed, the initializer's name, the
// element's index in the whole initializer) alone, computed with the Philox
// generator Dropout uses (Philox.h), so a ZeRO shard, a tile, an NVMe-tier
// tensor or a parameter's 16-bit copy holds exactly the elements the whole
// fp32 initializer of a one-rank run holds. Header-only and free of the
// standard library, so the cpu loader and the cuda kernel share it.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_SUPPORT_RANDOMINIT_H
#define ZINC_SUPPORT_RANDOMINIT_H

#include "zinc/support/Philox.h"
#include <math.h>

namespace zinc {

/// The standard deviation of random matrices: nanoGPT's and Hugging Face's
/// `initializer_range`.
constexpr float kRandomInitStd = 0.02f;

/// Tells --init=random's stream apart from Dropout's (whose counter's last
/// word is a step, small): "INIT".
constexpr uint32_t kRandomInitTag = 0x494E4954u;

/// FNV-1a (64-bit) of an initializer's name: the stream of its elements. A
/// fixed formula, not std::hash, so values never change between builds.
inline uint64_t randomInitKey(const char *name, uint64_t length) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint64_t i = 0; i < length; ++i) {
    h ^= static_cast<uint8_t>(name[i]);
    h *= 0x100000001b3ull;
  }
  return h;
}

/// Four random words for elements [4 * block, 4 * block + 4) of the
/// initializer keyed `key`, under run seed `seed`.
ZINC_HOST_DEVICE inline Philox4x32Counter
randomInitBlock(uint64_t seed, uint64_t key, uint64_t block) {
  Philox4x32Counter c = {{static_cast<uint32_t>(block),
                          static_cast<uint32_t>(block >> 32),
                          static_cast<uint32_t>(key),
                          static_cast<uint32_t>(key >> 32)}};
  Philox4x32Key k = {{static_cast<uint32_t>(seed),
                      static_cast<uint32_t>(seed >> 32) ^ kRandomInitTag}};
  return philox4x32(c, k);
}

/// Elements 4b + 2p and 4b + 2p + 1 of a normal(0, std) initializer from
/// block b's words: the Box-Muller pair of words 2p, 2p+1 (u1 in (0, 1], so
/// the logarithm is finite) gives the cosine and the sine.
ZINC_HOST_DEVICE inline void randomInitNormalPair(const Philox4x32Counter &words,
                                                  unsigned pair, float stddev,
                                                  float &even, float &odd) {
  float u1 = (static_cast<float>(words.v[2 * pair] >> 8) + 1.0f) *
             (1.0f / 16777216.0f);
  float u2 = static_cast<float>(words.v[2 * pair + 1] >> 8) * (1.0f / 16777216.0f);
  float radius = stddev * sqrtf(-2.0f * logf(u1));
  float angle = 6.2831853071795864769f * u2;
  even = radius * cosf(angle);
  odd = radius * sinf(angle);
}

/// Element 4b + lane of a normal(0, std) initializer from block b's words.
ZINC_HOST_DEVICE inline float randomInitNormal(const Philox4x32Counter &words,
                                               unsigned lane, float stddev) {
  float even, odd;
  randomInitNormalPair(words, lane / 2, stddev, even, odd);
  return (lane & 1u) ? odd : even;
}

/// Where element i of a plan tensor lies in its whole initializer: the
/// tensor may be one rank's ZeRO shard (elements [shardBase, shardBase + n)
/// of its flattened `view`, zeros past `viewElements`) of a tile (runs of
/// `runLength` contiguous elements, run r at `first + r * stride`), or both,
/// or neither (shardBase 0, runLength = stride = viewElements, first 0).
struct RandomInitIndexMap {
  uint64_t shardBase = 0;
  uint64_t viewElements = 0;
  uint64_t runLength = 1;
  uint64_t stride = 1;
  uint64_t first = 0;
};

/// The whole initializer's element for tensor element `i`, or false when
/// the element is a shard's padding (zero).
ZINC_HOST_DEVICE inline bool randomInitElement(const RandomInitIndexMap &map,
                                               uint64_t i, uint64_t &element) {
  uint64_t j = map.shardBase + i;
  if (j >= map.viewElements)
    return false;
  element = map.first + (j / map.runLength) * map.stride + j % map.runLength;
  return true;
}

} // namespace zinc

#endif
