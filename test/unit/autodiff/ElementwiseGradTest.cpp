//===- ElementwiseGradTest.cpp - Broadcasting arithmetic rules vs FD ------===//
#include "GradCheck.h"
#include "gtest/gtest.h"

using namespace zinc::test;

// Each loss is a weighted sum with a frozen random weight c_w, so every
// output element's gradient differs.
static void check(llvm::ArrayRef<ParamSpec> params, llvm::StringRef body,
                  std::vector<int64_t> outShape) {
  std::vector<ParamSpec> all(params.begin(), params.end());
  all.push_back({"c_w", outShape});
  std::string text = gradCheckModel(
      randomInitializers(all),
      body.str() + "\n  weighted = Mul(y, c_w)\n  loss = ReduceSum<keepdims=0>(weighted)");
  GradCheckOptions opts;
  opts.freeze = "^c_";
  expectGradientsMatch(text, opts);
}

TEST(ElementwiseGrad, AddBroadcastsBothWays) {
  check({{"a", {2, 1, 4}}, {"b", {3, 1}}}, "  y = Add(a, b)", {2, 3, 4});
}

TEST(ElementwiseGrad, SubWithScalar) {
  check({{"a", {3, 4}}, {"b", {}}}, "  y = Sub(a, b)", {3, 4});
}

TEST(ElementwiseGrad, MulBroadcastRank) {
  check({{"a", {2, 3, 4}}, {"b", {4}}}, "  y = Mul(a, b)", {2, 3, 4});
}

TEST(ElementwiseGrad, DivAwayFromZero) {
  check({{"a", {3, 4}}, {"b", {3, 1}, 0.5, 2.0}}, "  y = Div(a, b)", {3, 4});
}

TEST(ElementwiseGrad, NegAndFanOut) {
  // `a` feeds two ops: gradients accumulate.
  check({{"a", {5}}}, "  n = Neg(a)\n  y = Mul(n, a)", {5});
}

TEST(ElementwiseGrad, ReduceMeanAndSumAxes) {
  check({{"a", {2, 3, 4}}},
        "  m = ReduceMean<axes=[1], keepdims=1>(a)\n  y = Add(a, m)", {2, 3, 4});
}

TEST(MatMulGrad, BatchedWithBroadcastWeight) {
  check({{"a", {2, 3, 4}}, {"b", {4, 5}}}, "  y = MatMul(a, b)", {2, 3, 5});
}

TEST(MatMulGrad, VectorOperands) {
  check({{"a", {4}}, {"b", {4, 5}}}, "  y = MatMul(a, b)", {5});
  check({{"a", {3, 4}}, {"b", {4}}}, "  y = MatMul(a, b)", {3});
}
