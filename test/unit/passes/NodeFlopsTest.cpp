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

} // namespace
