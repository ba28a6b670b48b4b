//===- SizeTest.cpp - Size flags: binary and decimal units ----------------===//
#include "zinc/support/Size.h"
#include "gtest/gtest.h"

using zinc::parseSize;

static uint64_t ok(llvm::StringRef text) {
  auto v = parseSize(text);
  EXPECT_TRUE(static_cast<bool>(v)) << text.str();
  if (!v) {
    llvm::consumeError(v.takeError());
    return 0;
  }
  return *v;
}

static std::string fails(llvm::StringRef text) {
  auto v = parseSize(text);
  EXPECT_FALSE(static_cast<bool>(v)) << text.str();
  return v ? "" : llvm::toString(v.takeError());
}

TEST(SizeTest, PlainBytes) { EXPECT_EQ(ok("4096"), 4096u); }

TEST(SizeTest, BinaryUnitsArePowersOf1024) {
  EXPECT_EQ(ok("512MiB"), 512ull << 20);
  EXPECT_EQ(ok("8GiB"), 8ull << 30);
  EXPECT_EQ(ok("1KiB"), 1024u);
  EXPECT_EQ(ok("2TiB"), 2ull << 40);
}

TEST(SizeTest, DecimalUnitsArePowersOf1000) {
  EXPECT_EQ(ok("1.5TB"), 1500000000000ull);
  EXPECT_EQ(ok("3MB"), 3000000u);
  EXPECT_EQ(ok("1KB"), 1000u);
}

TEST(SizeTest, FractionsOfBinaryUnitsRoundDown) {
  EXPECT_EQ(ok("1.5GiB"), 3ull << 29);
  EXPECT_EQ(ok("0.5KiB"), 512u);
}

TEST(SizeTest, RejectsNonsenseWithTheText) {
  EXPECT_NE(fails("12XB").find("invalid size '12XB'"), std::string::npos);
  fails("");
  fails("GiB");
  fails("1.2.3MB");
  fails("-5MiB");
  fails("99999999999TB");
}
