//===- NodeFlopsTest.cpp - The FLOPs the cost model prices ops by ---------===//
//
// A convolution and each of its gradients is one convolution run forward,
// transposed or for its weight: the same multiply-adds. The cost model
// prices compute by these counts, so a gradient counted from the wrong
// operand (the image taken for the weight) mis-times every CNN's backward.
//
//===----------------------------------------------------------------------===//
#include "zinc/passes/NodeFlops.h"
#include "zinc/ir/Parser.h"
#include "gtest/gtest.h"
#include <vector>

using namespace zinc;

namespace {

// X [2,3,8,8] * W [4,3,3,3] -> Y [2,4,6,6]: each of Y's 288 elements sums
// 3 channels x 9 taps, a multiply and an add each.
constexpr uint64_t kConvFlops = 2ull * 288 * 27;

const char *kConvs = R"(graph "convs" {
  input %x : f32[2,3,8,8]
  input %w : f32[4,3,3,3]
  input %dy : f32[2,4,6,6]
  input %tx : f32[2,4,6,6]
  input %tw : f32[4,3,3,3]
  input %tdy : f32[2,3,8,8]
  %y : f32[2,4,6,6] = Conv(%x, %w) name "conv"
  %dx : f32[2,3,8,8] = zinc.ConvGradInput(%dy, %w) name "conv_dx"
  %dw : f32[4,3,3,3] = zinc.ConvGradWeight(%dy, %x) name "conv_dw"
  %ty : f32[2,3,8,8] = ConvTranspose(%tx, %tw) name "convt"
  %tdx : f32[2,4,6,6] = zinc.ConvTransposeGradInput(%tdy, %tw) name "convt_dx"
  %tdw : f32[4,3,3,3] = zinc.ConvTransposeGradWeight(%tdy, %tx) name "convt_dw"
  output %y
  output %dx
  output %dw
  output %ty
  output %tdx
  output %tdw
}
)";

TEST(NodeFlops, AConvolutionAndItsGradientsCostTheSame) {
  auto g = ir::parseGraph(kConvs, "convs.zir");
  ASSERT_TRUE(bool(g)) << llvm::toString(g.takeError());
  int seen = 0;
  for (const ir::Node *n : (*g)->nodes()) {
    EXPECT_EQ(passes::estimateFlops(*n), kConvFlops) << n->describe();
    ++seen;
  }
  EXPECT_EQ(seen, 6);
}

// A loss's work is a pass over its scores: one value out per sample, or
// one for the batch, says nothing of the classes it read.
TEST(NodeFlops, ALossCountsItsScores) {
  auto g = ir::parseGraph(R"(graph "loss" {
  input %scores : f32[4,1000]
  input %labels : i64[4]
  %loss : f32[] = SoftmaxCrossEntropyLoss(%scores, %labels) name "ce"
  %nll : f32[] = NegativeLogLikelihoodLoss(%scores, %labels) name "nll"
  output %loss
  output %nll
}
)",
                          "loss.zir");
  ASSERT_TRUE(bool(g)) << llvm::toString(g.takeError());
  for (const ir::Node *n : (*g)->nodes()) {
    EXPECT_EQ(passes::estimateFlops(*n), 4000u) << n->describe();
    EXPECT_FALSE(passes::flopsPerOutputElement(*n)) << n->describe();
  }
}

// What spill recomputes rather than moves: ops whose work is a pass over
// their output, from the same column.
TEST(NodeFlops, ElementwiseOpsArePerOutputElementProductsAreNot) {
  auto g = ir::parseGraph(R"(graph "mixed" {
  input %a : f32[8,8]
  %t : f32[8,8] = Tanh(%a) name "tanh"
  %m : f32[8,8] = MatMul(%t, %a) name "mm"
  output %m
}
)",
                          "mixed.zir");
  ASSERT_TRUE(bool(g)) << llvm::toString(g.takeError());
  std::vector<bool> perOutput;
  for (const ir::Node *n : (*g)->nodes())
    perOutput.push_back(passes::flopsPerOutputElement(*n));
  EXPECT_EQ(perOutput, (std::vector<bool>{true, false}));
}

} // namespace
