//===- DataMovementGradTest.cpp - Transpose ... Gemm, ReduceMax vs FD -----===//
#include "RuleChecks.h"
#include "gtest/gtest.h"

using namespace zinc;
using namespace zinc::test;

TEST(DataMovementGrad, TransposePermAndDefault) {
  checkWeighted(
      {{{"a", {2, 3, 4}}}, "  y = Transpose<perm = [2, 0, 1]>(a)", {4, 2, 3}});
  checkWeighted({{{"a", {2, 3}}}, "  y = Transpose(a)", {3, 2}});
}

TEST(DataMovementGrad, ConcatNegativeAxisWithFrozenInput) {
  checkWeighted({{{"a", {2, 3}}, {"c_b", {2, 1}}, {"d", {2, 2}}},
                 "  y = Concat<axis = -1>(a, c_b, d)",
                 {2, 6}});
}

TEST(DataMovementGrad, ConcatBeforeOpset13) {
  // Split takes its sizes as an attribute before opset 13.
  checkWeighted({{{"a", {1, 2, 3}}, {"b", {2, 2, 3}}},
                 "  y = Concat<axis = 0>(a, b)",
                 {3, 2, 3},
                 11});
  checkWeighted({{{"a", {2, 1, 3}}, {"b", {2, 2, 3}}},
                 "  y = Concat<axis = 1>(a, b)",
                 {2, 3, 3}});
}

TEST(DataMovementGrad, SplitUnusedOutputGetsZeros) {
  checkWeighted({{{"a", {2, 4}}},
                 "  sp = Constant<value = int64[2] {1, 3}>()\n"
                 "  unused, y = Split<axis = -1>(a, sp)",
                 {2, 3}});
}

TEST(DataMovementGrad, SplitOutputsSwapped) {
  checkWeighted(
      {{{"a", {4, 3}}},
       "  p0, p1 = Split<axis = 0>(a)\n  y = Concat<axis = 0>(p1, p0)",
       {4, 3}});
  checkWeighted({{{"a", {2, 4}}},
                 "  p0, p1 = Split<axis = 1, split = [3, 1]>(a)\n"
                 "  y = Concat<axis = 1>(p1, p0)",
                 {2, 4},
                 11});
}

TEST(DataMovementGrad, SliceConstantsNegativeAxisAndStep) {
  checkWeighted({{{"a", {4, 5}}},
                 "  st = Constant<value = int64[2] {1, -4}>()\n"
                 "  en = Constant<value = int64[2] {3, 100}>()\n"
                 "  ax = Constant<value = int64[2] {0, -1}>()\n"
                 "  sp = Constant<value = int64[2] {1, 2}>()\n"
                 "  y = Slice(a, st, en, ax, sp)",
                 {2, 2}});
}

TEST(DataMovementGrad, SliceNegativeSteps) {
  // Rows 4, 2, 0 in that order; columns 3, 2, 1.
  checkWeighted({{{"a", {5, 4}}},
                 "  st = Constant<value = int64[2] {-1, 3}>()\n"
                 "  en = Constant<value = int64[2] {-100, 0}>()\n"
                 "  ax = Constant<value = int64[2] {0, 1}>()\n"
                 "  sp = Constant<value = int64[2] {-2, -1}>()\n"
                 "  y = Slice(a, st, en, ax, sp)",
                 {3, 3}});
}

TEST(DataMovementGrad, SliceInitializerArgumentsNoAxes) {
  checkWeighted({{{"a", {3, 4, 2}}},
                 "  y = Slice(a, c_st, c_en)",
                 {2, 2, 2},
                 17,
                 "int64[2] c_st = {1, 1}, int64[2] c_en = {3, 3}"});
}

TEST(DataMovementGrad, SliceAttributesBeforeOpset10) {
  // (onnx's shape inference gives up on negative starts in this form; the
  // kernel's handling of them is shared with the input form above.)
  checkWeighted({{{"a", {3, 4}}},
                 "  y = Slice<starts = [1], ends = [3], axes = [1]>(a)",
                 {3, 2},
                 9});
  checkWeighted({{{"a", {3, 4}}},
                 "  y = Slice<starts = [0, 1], ends = [2, 4]>(a)",
                 {2, 3},
                 9});
}

TEST(DataMovementGrad, GatherEmbeddingRepeatedAndNegativeIndices) {
  // Row 0 is gathered three times and row 4 twice (once as -1): the
  // gradients add up.
  checkWeighted({{{"emb", {5, 3}}},
                 "  y = Gather(emb, c_ids)",
                 {2, 3, 3},
                 17,
                 "int64[2,3] c_ids = {0, 4, -1, 0, 2, 0}"});
}

TEST(DataMovementGrad, GatherInnerAndNegativeAxis) {
  checkWeighted({{{"a", {2, 4, 3}}},
                 "  y = Gather<axis = 1>(a, c_ids)",
                 {2, 3, 3},
                 17,
                 "int32[3] c_ids = {3, -4, 3}"});
  checkWeighted({{{"a", {2, 4}}},
                 "  y = Gather<axis = -1>(a, c_ids)",
                 {2, 3},
                 17,
                 "int64[3] c_ids = {1, 1, -1}"});
}

TEST(DataMovementGrad, GatherScalarIndex) {
  checkWeighted({{{"a", {3, 4}}},
                 "  y = Gather<axis = 1>(a, c_i)",
                 {3},
                 17,
                 "int64 c_i = {2}"});
}

TEST(DataMovementGrad, TriluUpperLowerAndK) {
  checkWeighted({{{"a", {3, 4}}}, "  y = Trilu(a)", {3, 4}, 14});
  checkWeighted({{{"a", {2, 3, 4}}},
                 "  y = Trilu<upper = 0>(a, c_k)",
                 {2, 3, 4},
                 14,
                 "int64 c_k = {-1}"});
  checkWeighted(
      {{{"a", {4, 3}}},
       "  k = Constant<value = int64 {1}>()\n  y = Trilu<upper = 1>(a, k)",
       {4, 3},
       14});
}

TEST(DataMovementGrad, GemmPlainWithVectorC) {
  checkWeighted({{{"a", {3, 4}}, {"b", {4, 5}}, {"c", {5}}},
                 "  y = Gemm<alpha = 0.5, beta = 2.0>(a, b, c)",
                 {3, 5}});
}

TEST(DataMovementGrad, GemmTransposedWithColumnC) {
  checkWeighted(
      {{{"a", {4, 3}}, {"b", {5, 4}}, {"c", {3, 1}}},
       "  y = Gemm<transA = 1, transB = 1, alpha = 1.5, beta = -1.0>(a, b, c)",
       {3, 5}});
}

TEST(DataMovementGrad, GemmOneTransposeScalarOrNoC) {
  checkWeighted({{{"a", {4, 3}}, {"b", {4, 5}}, {"c", {}}},
                 "  y = Gemm<transA = 1>(a, b, c)",
                 {3, 5}});
  checkWeighted(
      {{{"a", {3, 4}}, {"b", {5, 4}}}, "  y = Gemm<transB = 1>(a, b)", {3, 5}});
}

TEST(DataMovementGrad, GemmBeforeOpset11) {
  // C is required before opset 11: the gradient Gemms get a zero C.
  checkWeighted({{{"a", {3, 4}}, {"b", {5, 4}}, {"c", {3, 5}}},
                 "  y = Gemm<transB = 1, alpha = 2.0>(a, b, c)",
                 {3, 5},
                 9});
}

TEST(DataMovementGrad, ReduceMaxAxesAndKeepDims) {
  checkWeighted(
      {{{"a", {2, 3, 4}}}, "  y = ReduceMax<axes = [1]>(a)", {2, 1, 4}});
  checkWeighted({{{"a", {2, 3, 4}}},
                 "  y = ReduceMax<axes = [-1, 0], keepdims = 0>(a)",
                 {3}});
  checkWeighted({{{"a", {2, 3}}}, "  y = ReduceMax<keepdims = 0>(a)", {}});
}

TEST(DataMovementGrad, ReduceMaxTiesSplitEvenly) {
  // Two equal maxima in row 0: the central difference of max is 1/2 for
  // each (one side moves the max, the other does not), which is the even
  // split. A rule giving each tie the whole gradient fails here.
  checkWeighted({{},
                 "  y = ReduceMax<axes = [1], keepdims = 0>(t)",
                 {2},
                 17,
                 "double[2,3] t = {1.0, 3.0, 3.0, 0.5, 2.0, -1.0}"});
}

TEST(DataMovementGrad, SliceNonConstantArgumentIsRefused) {
  // The frontend cannot give such a Slice a static shape from an ONNX
  // model, but an IR file can: the rule must refuse, not guess.
  std::string err = buildTrainingText(R"(graph "g" opset 17 {
  input %s : i64[1]
  param %a : f64[4] init "a"
  const %e : i64[1] init "e"
  %y : f64[2] = Slice(%a, %s, %e) name "slice"
  %loss : f64[] = ReduceSum(%y) name "sum" {keepdims = 0 : int}
  output %loss
})");
  EXPECT_NE(
      err.find("unsupported: gradient of Slice with non-constant starts 's'"),
      std::string::npos)
      << err;
}

TEST(DataMovementGrad, ParameterReadByTwoConcatsGetsBothParts) {
  // a's gradient is the sum of two parts; the check reads "a.grad", which
  // must be that sum and not the first part (partial sums of a parameter's
  // gradient are named apart).
  checkWeighted({{{"a", {2, 3}}, {"b", {2, 2}}},
                 "  c1 = Concat<axis = 1>(a, b)\n"
                 "  c2 = Concat<axis = 1>(a, b, b)\n"
                 "  y = Concat<axis = 1>(c1, c2)",
                 {2, 12}});
}
