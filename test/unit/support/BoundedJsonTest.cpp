//===- BoundedJsonTest.cpp - JSON nesting bounded before parsing, sizes checked ===//
#include "zinc/support/BoundedJson.h"
#include "zinc/support/DType.h"
#include "gtest/gtest.h"
#include <string>

using namespace zinc;

static std::string nested(unsigned depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

// The bound itself parses; one level more is refused as too deep, and so
// is a depth that would overflow the recursive parser's stack.
TEST(BoundedJson, RefusesNestingPastTheBound) {
  EXPECT_TRUE(static_cast<bool>(parseJson(nested(kMaxJsonDepth))));
  for (unsigned depth : {kMaxJsonDepth + 1, 1000000u}) {
    auto parsed = parseJson(nested(depth));
    ASSERT_FALSE(static_cast<bool>(parsed));
    EXPECT_EQ(llvm::toString(parsed.takeError()),
              "nested too deep (more than 256 levels)");
  }
}

// Brackets inside strings (after escaped quotes too) are text, not nesting.
TEST(BoundedJson, BracketsInStringsDoNotCount) {
  std::string text = "{\"k\": \"\\\"" + std::string(1000, '[') + "\"}";
  auto parsed = parseJson(text);
  ASSERT_TRUE(static_cast<bool>(parsed)) << llvm::toString(parsed.takeError());
  EXPECT_EQ(parsed->getAsObject()->getString("k")->size(), 1001u);
}

// Malformed text keeps llvm::json's own message.
TEST(BoundedJson, OtherErrorsAreTheParsers) {
  auto parsed = parseJson("{\"a\": }");
  ASSERT_FALSE(static_cast<bool>(parsed));
  EXPECT_NE(llvm::toString(parsed.takeError()).find("Invalid JSON value"),
            std::string::npos);
}

// Byte counts: every product checked, so [2^52, 512] of f32 (2^73 bytes,
// 0 after wrapping) has no size; negative dimensions neither.
TEST(TensorBytes, ChecksEveryProduct) {
  EXPECT_EQ(tensorBytes({3, 5}, 4), llvm::Optional<uint64_t>(60));
  EXPECT_EQ(tensorBytes({0, int64_t(1) << 62}, 4), llvm::Optional<uint64_t>(0));
  EXPECT_FALSE(tensorBytes({int64_t(1) << 52, 512}, 4).hasValue());
  EXPECT_FALSE(tensorBytes({int64_t(1) << 58}, 8).hasValue()); // past 2^60
  EXPECT_FALSE(tensorBytes({-1, 4}, 4).hasValue());
}
