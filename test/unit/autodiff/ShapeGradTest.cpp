//===- ShapeGradTest.cpp - Reshape/Flatten/Squeeze/Unsqueeze/Expand vs FD -===//
#include "RuleChecks.h"
#include "gtest/gtest.h"

using namespace zinc::test;

// Each reshaping op is followed by a Mul with a second parameter of the
// output shape, so an element that lands in the wrong place gets the wrong
// weight.

TEST(ShapeGrad, ReshapeWithInferredDim) {
  checkWeighted({{{"a", {2, 3, 4}}, {"b", {6, 4}}},
                 "  s = Constant<value = int64[2] {-1, 4}>()\n"
                 "  r = Reshape(a, s)\n  y = Mul(r, b)",
                 {6, 4}});
}

TEST(ShapeGrad, Flatten) {
  checkWeighted({{{"a", {2, 3, 4}}}, "  y = Flatten<axis = 2>(a)", {6, 4}});
  checkWeighted({{{"a", {2, 3, 4}}}, "  y = Flatten<axis = -1>(a)", {6, 4}});
}

TEST(ShapeGrad, SqueezeAxesInput) {
  checkWeighted(
      {{{"a", {2, 1, 3, 1}}},
       "  ax = Constant<value = int64[2] {1, -1}>()\n  y = Squeeze(a, ax)",
       {2, 3}});
}

TEST(ShapeGrad, SqueezeAxesAttributeBeforeOpset13) {
  checkWeighted(
      {{{"a", {2, 1, 3}}}, "  y = Squeeze<axes = [1]>(a)", {2, 3}, 11});
  checkWeighted(
      {{{"a", {1, 3, 1}}}, "  y = Squeeze<axes = [0, -1]>(a)", {3}, 11});
}

TEST(ShapeGrad, UnsqueezeBothForms) {
  checkWeighted(
      {{{"a", {2, 3}}},
       "  ax = Constant<value = int64[2] {0, -1}>()\n  y = Unsqueeze(a, ax)",
       {1, 2, 3, 1}});
  checkWeighted(
      {{{"a", {2, 3}}}, "  y = Unsqueeze<axes = [1]>(a)", {2, 1, 3}, 11});
}

TEST(ShapeGrad, ExpandSumsBroadcastAxes) {
  // Leading axis added, size-1 axis broadcast, and a target dim of 1 that
  // keeps the input's own size.
  checkWeighted(
      {{{"a", {3, 1, 5}}},
       "  s = Constant<value = int64[4] {2, 3, 4, 1}>()\n  y = Expand(a, s)",
       {2, 3, 4, 5}});
}

TEST(ShapeGrad, ExpandScalar) {
  checkWeighted(
      {{{"a", {}}},
       "  s = Constant<value = int64[2] {2, 3}>()\n  y = Expand(a, s)",
       {2, 3}});
}
