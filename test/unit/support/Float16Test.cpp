//===- Float16Test.cpp - half / bfloat16 conversions round to nearest even ===//
#include "zinc/support/Float16.h"
#include "gtest/gtest.h"
#include <cmath>
#include <cstring>

using namespace zinc;

static float bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(Float16Test, ExactValuesRoundTrip) {
  for (float f : {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 6.103515625e-05f /*min normal*/,
                  5.9604644775390625e-08f /*min subnormal*/})
    EXPECT_EQ(halfToFloat(floatToHalf(f)), f) << f;
}

TEST(Float16Test, EveryHalfSurvivesARoundTripThroughFloat) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = halfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f))
      continue;
    EXPECT_EQ(floatToHalf(f), h) << std::hex << h;
  }
}

TEST(Float16Test, TiesRoundToEven) {
  // 1 + 2^-11 is half-way between 1 and the next half (1 + 2^-10): to even = 1.
  EXPECT_EQ(floatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  // 1 + 3*2^-11 is half-way between 1+2^-10 (odd) and 1+2^-9 (even).
  EXPECT_EQ(floatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
}

TEST(Float16Test, OverflowAndNaN) {
  EXPECT_EQ(floatToHalf(70000.0f), 0x7c00);
  EXPECT_EQ(floatToHalf(-70000.0f), 0xfc00);
  EXPECT_TRUE(std::isnan(halfToFloat(floatToHalf(NAN))));
  EXPECT_TRUE(std::isinf(halfToFloat(0x7c00)));
}

TEST(Float16Test, SubnormalsRound) {
  // Half of the smallest subnormal rounds to zero (tie to even), a bit more
  // rounds up to it.
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(floatToHalf(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(floatToHalf(std::ldexp(3.0f, -25)), 0x0002); // 1.5 ulp ties to even
}

TEST(BFloat16Test, RoundsToNearestEven) {
  EXPECT_EQ(floatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(floatToBf16(bits(0x3f808000)), 0x3f80); // tie, even stays
  EXPECT_EQ(floatToBf16(bits(0x3f818000)), 0x3f82); // tie, odd rounds up
  EXPECT_EQ(floatToBf16(bits(0x3f808001)), 0x3f81);
  EXPECT_EQ(bf16ToFloat(0x3f80), 1.0f);
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(NAN))));
}
