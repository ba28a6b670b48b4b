//===- RotaryGradTest.cpp - zinc.Rotary's gradients vs finite differences -===//
//
// fuse-rotary makes Llama's x * cos + rotate_half(x) * sin one zinc.Rotary
// (test/lit/passes/fuse-rotary.onnxtxt); x's gradient is zinc.RotaryGrad,
// trained tables get theirs through the rule's products.
//
//===----------------------------------------------------------------------===//
#include "RuleChecks.h"
#include "gtest/gtest.h"

using namespace zinc::test;

namespace {

/// The exported formula over x = a with tables `cos` and `sin`, the halves
/// of a last axis of `d`.
std::string rotaryBody(const std::string &cos, const std::string &sin, int d) {
  std::string h = std::to_string(d / 2);
  return "  zero = Constant<value = int64[1] {0}>()\n"
         "  half = Constant<value = int64[1] {" +
         h +
         "}>()\n"
         "  end = Constant<value = int64[1] {9223372036854775807}>()\n"
         "  last = Constant<value = int64[1] {-1}>()\n"
         "  x1 = Slice(a, zero, half, last)\n"
         "  x2 = Slice(a, half, end, last)\n"
         "  n = Neg(x2)\n"
         "  r = Concat<axis = -1>(n, x1)\n"
         "  xc = Mul(a, " +
         cos +
         ")\n"
         "  rs = Mul(r, " +
         sin +
         ")\n"
         "  y = Add(xc, rs)";
}

} // namespace

TEST(RotaryGrad, TablesBroadcastOverBatchAndHeads) {
  // x [2,3,4,6], tables [4,6] as Llama's [1,1,T,D]: only x is trained.
  checkWeighted({{{"a", {2, 3, 4, 6}}, {"c_cos", {4, 6}}, {"c_sin", {4, 6}}},
                 rotaryBody("c_cos", "c_sin", 6),
                 {2, 3, 4, 6},
                 17,
                 "",
                 1e-6,
                 1e-6,
                 "fuse-rotary,build-training",
                 {"zinc.Rotary", "zinc.RotaryGrad"}});
}

TEST(RotaryGrad, TablesBroadcastAlongTheLastAxis) {
  // Tables of [3,1]: one angle per row, the same for every column.
  checkWeighted({{{"a", {3, 4}}, {"c_cos", {3, 1}}, {"c_sin", {3, 1}}},
                 rotaryBody("c_cos", "c_sin", 4),
                 {3, 4},
                 17,
                 "",
                 1e-6,
                 1e-6,
                 "fuse-rotary,build-training",
                 {"zinc.RotaryGrad"}});
}

TEST(RotaryGrad, TrainedTables) {
  // The tables are parameters: their gradients are summed over the batch
  // axis they were broadcast along.
  checkWeighted({{{"a", {2, 3, 4}}, {"cos", {3, 4}}, {"sin", {3, 4}}},
                 rotaryBody("cos", "sin", 4),
                 {2, 3, 4},
                 17,
                 "",
                 1e-6,
                 1e-6,
                 "fuse-rotary,build-training",
                 {"zinc.Rotary", "zinc.RotaryGrad"}});
}
