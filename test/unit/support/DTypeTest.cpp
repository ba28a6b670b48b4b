//===- DTypeTest.cpp - Element counts and tensor sizes that cannot overflow ===//
#include "zinc/support/DType.h"
#include <gtest/gtest.h>

using namespace zinc;

TEST(DTypeTest, NumElementsOfOrdinaryShapes) {
  EXPECT_EQ(numElements({}), 1);
  EXPECT_EQ(numElements({2, 3, 4}), 24);
  EXPECT_EQ(numElements({4, 0, 7}), 0);
}

// Found by fuzzing the ONNX frontend: a model's dims multiplied past 2^63
// (signed overflow, undefined behaviour) before the frontend refused them.
TEST(DTypeTest, NumElementsSaturatesInsteadOfOverflowing) {
  EXPECT_EQ(numElements({int64_t(1) << 40, int64_t(1) << 40}), INT64_MAX);
  // A zero anywhere is an empty tensor, whatever comes before it.
  EXPECT_EQ(numElements({int64_t(1) << 40, int64_t(1) << 40, 0}), 0);
}

TEST(DTypeTest, FitsTensorBytes) {
  EXPECT_TRUE(fitsTensorBytes({1024, 1024}, 4));
  EXPECT_TRUE(fitsTensorBytes({int64_t(1) << 58}, 4)); // exactly 2^60 bytes
  EXPECT_FALSE(fitsTensorBytes({int64_t(1) << 58}, 8));
  EXPECT_FALSE(fitsTensorBytes({int64_t(1) << 32, int64_t(1) << 32}, 4));
  EXPECT_TRUE(fitsTensorBytes({int64_t(1) << 40, int64_t(1) << 40, 0}, 4));
  EXPECT_FALSE(fitsTensorBytes({3, -1}, 4));
}
