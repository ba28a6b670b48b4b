//===- IndexingGradTest.cpp - Pad, Tile, CumSum, gathers, scatters, Max vs FD ===//
#include "RuleChecks.h"
#include "gtest/gtest.h"

using namespace zinc;
using namespace zinc::test;

TEST(IndexingGrad, PadConstantGrowsAndCrops) {
  // Dimension 0 grows by 1 and 2, dimension 1 loses one column in front.
  checkWeighted({{{"a", {2, 4}}},
                 "  pads = Constant<value = int64[4] {1, -1, 2, 1}>()\n"
                 "  y = Pad<mode = \"constant\">(a, pads)",
                 {5, 4}});
}

TEST(IndexingGrad, PadReflectAndEdgeSendSeveralGradientsToOneInput) {
  for (const char *mode : {"reflect", "edge"})
    checkWeighted({{{"a", {2, 3, 4}}},
                   std::string("  pads = Constant<value = int64[6] {0, 1, 2, 0, 2, 1}>()\n"
                               "  y = Pad<mode = \"") +
                       mode + "\">(a, pads)",
                   {2, 6, 7}});
}

TEST(IndexingGrad, PadWithInitializerPads) {
  checkWeighted({{{"a", {3, 2}}},
                 "  y = Pad(a, c_pads)",
                 {4, 5},
                 17,
                 "int64[4] c_pads = {1, 1, 0, 2}"});
}

TEST(IndexingGrad, TileSumsTheCopies) {
  checkWeighted({{{"a", {2, 3}}},
                 "  r = Constant<value = int64[2] {3, 2}>()\n"
                 "  y = Tile(a, r)",
                 {6, 6}});
  checkWeighted({{{"a", {2, 1, 3}}},
                 "  r = Constant<value = int64[3] {1, 4, 1}>()\n"
                 "  y = Tile(a, r)",
                 {2, 4, 3}});
}

TEST(IndexingGrad, CumSumEveryDirection) {
  for (int exclusive : {0, 1})
    for (int reverse : {0, 1})
      checkWeighted({{{"a", {3, 4}}},
                     "  ax = Constant<value = int64 {-1}>()\n"
                     "  y = CumSum<exclusive = " +
                         std::to_string(exclusive) + ", reverse = " +
                         std::to_string(reverse) + ">(a, ax)",
                     {3, 4}});
}

TEST(IndexingGrad, GatherElementsRepeatedIndicesAdd) {
  checkWeighted({{{"a", {3, 4}}},
                 "  y = GatherElements<axis = 0>(a, c_i)",
                 {2, 4},
                 17,
                 "int64[2,4] c_i = {0, 2, 2, -1, 1, 1, 0, 0}"});
}

TEST(IndexingGrad, ScattersZeroTheOverwrittenPlaces) {
  checkWeighted({{{"a", {4, 3}}, {"c_u", {2, 3}}},
                 "  y = ScatterND(a, c_i, c_u)",
                 {4, 3},
                 17,
                 "int64[2,1] c_i = {3, 0}"});
  checkWeighted({{{"a", {3, 3}}, {"c_u", {1, 3}}},
                 "  y = ScatterElements<axis = 0>(a, c_i, c_u)",
                 {3, 3},
                 17,
                 "int64[1,3] c_i = {1, 0, 2}"});
}

TEST(IndexingGrad, MaxAndMinBroadcast) {
  for (const char *op : {"Max", "Min"})
    checkWeighted({{{"a", {2, 3}}, {"b", {3}}},
                   std::string("  y = ") + op + "(a, b)",
                   {2, 3}});
}

TEST(IndexingGrad, HardSigmoidAndHardSwish) {
  // Inputs are within (-3, 3) in units of the random initializers, scaled
  // up so that some fall outside the linear part.
  checkWeighted({{{"a", {4, 5}}},
                 "  k = Constant<value = double {4.0}>()\n"
                 "  s = Mul(a, k)\n"
                 "  y = HardSigmoid<alpha = 0.6, beta = 0.5>(s)",
                 {4, 5}});
  checkWeighted({{{"a", {4, 5}}},
                 "  k = Constant<value = double {8.0}>()\n"
                 "  s = Mul(a, k)\n"
                 "  y = HardSwish(s)",
                 {4, 5}});
}

TEST(IndexingGrad, ReduceL2) {
  checkWeighted({{{"a", {3, 4}}},
                 "  y = ReduceL2<axes = [1], keepdims = 0>(a)",
                 {3}});
  checkWeighted({{{"a", {2, 3, 2}}},
                 "  y = ReduceL2<axes = [0, 2], keepdims = 1>(a)",
                 {1, 3, 1}});
}

TEST(IndexingGrad, PadAttributesBeforeOpset11) {
  checkWeighted({{{"a", {2, 3}}},
                 "  y = Pad<mode = \"edge\", pads = [1, 0, 0, 2]>(a)",
                 {3, 5},
                 10});
}
