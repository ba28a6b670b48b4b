//===- HoistIntoStallsTest.cpp - Independent compute fills the waits ------===//
#include "zinc/passes/HoistIntoStalls.h"
#include "zinc/ir/Parser.h"
#include "zinc/ir/Verifier.h"
#include "gtest/gtest.h"
#include <string>
#include <vector>

using namespace zinc;

namespace {

using Names = std::vector<std::string>;

struct Hoisted {
  Names order;
  size_t moved = 0;
};

/// `body`'s nodes with the predicted [start, end] of each, in order.
Hoisted hoist(const std::string &body, const std::vector<std::pair<double, double>> &times,
              double minStall = 1e-6, size_t window = 64) {
  std::string text = R"(graph "g" {
  input %x : f32[64]
  input %dy : f32[64]
  param %w : f32[64] in cpu init "w"
)" + body + "}\n";
  auto graph = ir::parseGraph(text, "test.zir");
  EXPECT_TRUE(static_cast<bool>(graph)) << llvm::toString(graph.takeError());
  std::vector<plan::PredictedInstruction> timeline;
  for (auto [start, end] : times) {
    plan::PredictedInstruction p;
    p.start = start;
    p.end = end;
    timeline.push_back(p);
  }
  Hoisted r;
  r.moved = passes::hoistIntoStalls(**graph, timeline, minStall, window);
  if (llvm::Error err = ir::verifyGraph(**graph))
    ADD_FAILURE() << llvm::toString(std::move(err));
  for (const ir::Node *n : (*graph)->nodes())
    r.order.push_back(n->name);
  return r;
}

/// Backward of y = x * w: the weight comes from the host (a late copy);
/// dX needs it, dW does not.
const char *kBackward = R"(
  %a : f32[64] = Relu(%x) name "fwd"
  %wg : f32[64] = zinc.Copy(%w) name "fetch-w" on h2d
  %dx : f32[64] = Mul(%dy, %wg) name "dX"
  %dw : f32[64] = Mul(%dy, %a) name "dW"
  %s : f32[64] = Add(%dx, %dw) name "sum"
  output %s
)";

} // namespace

TEST(HoistIntoStallsTest, TheWeightGradientFillsTheWaitForTheWeight) {
  // fwd ends at 1; the fetch ends at 5, so dX waits 4; dW takes 2.
  Hoisted r = hoist(kBackward, {{0, 1}, {0, 5}, {5, 6}, {6, 8}, {8, 9}});
  EXPECT_EQ(r.moved, 1u);
  EXPECT_EQ(r.order, (Names{"fwd", "fetch-w", "dW", "dX", "sum"}));
}

TEST(HoistIntoStallsTest, NoWaitNoMove) {
  Hoisted r = hoist(kBackward, {{0, 1}, {0, 0.5}, {1, 2}, {2, 4}, {4, 5}});
  EXPECT_EQ(r.moved, 0u);
  // A wait shorter than the minimum is left alone too.
  EXPECT_EQ(hoist(kBackward, {{0, 1}, {0, 5}, {5, 6}, {6, 8}, {8, 9}}, 10).moved, 0u);
}

TEST(HoistIntoStallsTest, ANodeNeedingTheLateValueOrWhatStaysIsNotMoved) {
  // dW2 reads the fetched weight; sum2 reads dX, which stays.
  Hoisted r = hoist(R"(
  %a : f32[64] = Relu(%x) name "fwd"
  %wg : f32[64] = zinc.Copy(%w) name "fetch-w" on h2d
  %dx : f32[64] = Mul(%dy, %wg) name "dX"
  %dw : f32[64] = Mul(%a, %wg) name "dW2"
  %s : f32[64] = Add(%dx, %a) name "sum2"
  output %dw
  output %s
)", {{0, 1}, {0, 5}, {5, 6}, {6, 8}, {8, 9}});
  EXPECT_EQ(r.moved, 0u);
}

TEST(HoistIntoStallsTest, ANodeWhoseInputIsStillInFlightIsNotMoved) {
  // dW reads %b, which a second copy delivers only at 7: moved before dX
  // (waiting from 1 to 5), it would wait itself.
  Hoisted r = hoist(R"(
  %a : f32[64] = Relu(%x) name "fwd"
  %wg : f32[64] = zinc.Copy(%w) name "fetch-w" on h2d
  %b : f32[64] = zinc.Copy(%w) name "fetch-b" on h2d
  %dx : f32[64] = Mul(%dy, %wg) name "dX"
  %dw : f32[64] = Mul(%dy, %b) name "dW"
  %s : f32[64] = Add(%dx, %dw) name "sum"
  output %s
)", {{0, 1}, {0, 5}, {5, 7}, {5, 6}, {7, 9}, {9, 10}});
  EXPECT_EQ(r.moved, 0u);
}

TEST(HoistIntoStallsTest, OnlyWithinTheWindowAndOnlyWithItsOwnTimeline) {
  // A window of no nodes reaches nothing.
  EXPECT_EQ(hoist(kBackward, {{0, 1}, {0, 5}, {5, 6}, {6, 8}, {8, 9}}, 1e-6, 0).moved, 0u);
  // A timeline of another plan (a node count that differs) moves nothing.
  EXPECT_EQ(hoist(kBackward, {{0, 1}, {0, 5}, {5, 6}}).moved, 0u);
}
