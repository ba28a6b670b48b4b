//===- FiniteJsonTest.cpp - Non-finite numbers become null ----------------===//
#include "zinc/support/FiniteJson.h"
#include "gtest/gtest.h"
#include <limits>

using namespace zinc;

static std::string print(const llvm::json::Value &value) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << value;
  return os.str();
}

// A NaN loss, an infinite norm nested in an object and in an array all turn
// into null, and the line says it held non-finite values.
TEST(FiniteJson, NonFiniteNumbersBecomeNullAndAreFlagged) {
  double nan = std::numeric_limits<double>::quiet_NaN();
  double inf = std::numeric_limits<double>::infinity();
  llvm::json::Object line{{"step", 3},
                          {"loss", nan},
                          {"nested", llvm::json::Object{{"norm", -inf}}},
                          {"list", llvm::json::Array{1.5, inf}}};
  llvm::json::Value value = finiteJsonObject(std::move(line));
  EXPECT_EQ(print(value), "{\"list\":[1.5,null],\"loss\":null,\"nested\":"
                          "{\"norm\":null},\"nonfinite\":true,\"step\":3}");
  // What it prints parses back.
  EXPECT_TRUE(static_cast<bool>(llvm::json::parse(print(value))));
}

// A line of finite values is left as it was, without the flag.
TEST(FiniteJson, FiniteLinesAreUnchanged) {
  llvm::json::Object line{{"step", 0}, {"loss", 0.25}, {"seconds", 1e-3}};
  llvm::json::Value value = finiteJsonObject(std::move(line));
  EXPECT_EQ(print(value), "{\"loss\":0.25,\"seconds\":0.001,\"step\":0}");
}
