//===- Float16.h - IEEE half and bfloat16 conversions to and from float ---===//
#ifndef ZINC_SUPPORT_FLOAT16_H
#define ZINC_SUPPORT_FLOAT16_H

#include <cstdint>
#include <cstring>

namespace zinc {

/// Storage types: the bits of a 16-bit float. Arithmetic happens in float.
struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

float halfToFloat(uint16_t h);
/// Round to nearest even, as PyTorch and numpy do.
uint16_t floatToHalf(float f);

inline float bf16ToFloat(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
/// Round to nearest even; NaN stays NaN.
inline uint16_t floatToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

} // namespace zinc

#endif
