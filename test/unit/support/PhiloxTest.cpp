//===- PhiloxTest.cpp - Philox4x32-10 against Random123's known answers ---===//
#include "zinc/support/Philox.h"
#include <cmath>
#include <gtest/gtest.h>

using namespace zinc;

namespace {

struct KnownAnswer {
  Philox4x32Counter counter;
  Philox4x32Key key;
  uint32_t expected[4];
};

// Random123 1.14, examples/kat_vectors: the philox4x32 10-round lines
// (counter[4] key[2] -> output[4]).
const KnownAnswer knownAnswers[] = {
    {{{0, 0, 0, 0}},
     {{0, 0}},
     {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
    {{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}},
     {{0xffffffff, 0xffffffff}},
     {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
    {{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}},
     {{0xa4093822, 0x299f31d0}},
     {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
};

TEST(Philox, KnownAnswerVectors) {
  for (const KnownAnswer &kat : knownAnswers) {
    Philox4x32Counter out = philox4x32(kat.counter, kat.key);
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(out.v[i], kat.expected[i]) << "word " << i;
  }
}

TEST(Philox, UniformUsesTheTop24Bits) {
  EXPECT_EQ(uniformFromBits(0), 0.0f);
  EXPECT_EQ(uniformFromBits(0xff), 0.0f);
  EXPECT_EQ(uniformFromBits(0x80000000u), 0.5f);
  EXPECT_LT(uniformFromBits(0xffffffffu), 1.0f);
  EXPECT_EQ(uniformFromBits(0xffffffffu), 1.0f - std::ldexp(1.0f, -24));
}

TEST(Philox, DropoutStreamSeparatesSeedStepAndNode) {
  // The stream's layout: block b holds elements 4b..4b+3.
  Philox4x32Counter a = dropoutBlock(7, 3, 2, 5);
  Philox4x32Counter direct = philox4x32({{5, 0, 2, 3}}, {{7, 0}});
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(a.v[i], direct.v[i]);
  // The high halves of seed and block reach the counter and key too.
  Philox4x32Counter high = dropoutBlock(7ull << 32, 3, 2, 5ull << 32);
  Philox4x32Counter highDirect = philox4x32({{0, 5, 2, 3}}, {{0, 7}});
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(high.v[i], highDirect.v[i]);
  auto differs = [&](Philox4x32Counter b) {
    return a.v[0] != b.v[0] || a.v[1] != b.v[1] || a.v[2] != b.v[2] ||
           a.v[3] != b.v[3];
  };
  EXPECT_TRUE(differs(dropoutBlock(8, 3, 2, 5)));
  EXPECT_TRUE(differs(dropoutBlock(7, 4, 2, 5)));
  EXPECT_TRUE(differs(dropoutBlock(7, 3, 3, 5)));
  EXPECT_TRUE(differs(dropoutBlock(7, 3, 2, 6)));
}

TEST(Philox, DropoutKeepsWithProbabilityOneMinusRatio) {
  EXPECT_TRUE(dropoutKeeps(0x80000000u, 0.5f));
  EXPECT_FALSE(dropoutKeeps(0x7fffffffu, 0.5f));
  EXPECT_TRUE(dropoutKeeps(0, 0.0f));
  const int64_t n = 1 << 20;
  int64_t kept = 0;
  for (int64_t b = 0; b < n / 4; ++b) {
    Philox4x32Counter c = dropoutBlock(1, 1, 0, b);
    for (uint32_t w : c.v)
      kept += dropoutKeeps(w, 0.1f);
  }
  // Within 5 standard deviations of n * 0.9.
  double sigma = std::sqrt(n * 0.9 * 0.1);
  EXPECT_LT(std::abs(kept - n * 0.9), 5 * sigma);
}

} // namespace
