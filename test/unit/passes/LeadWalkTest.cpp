//===- LeadWalkTest.cpp - The block walk stops where the node walk does ---===//
#include "zinc/passes/LeadWalk.h"
#include "zinc/ir/Parser.h"
#include "gtest/gtest.h"
#include <random>
#include <string>
#include <vector>

using namespace zinc;
using passes::LeadWalk;

namespace {

/// A program of `n` nodes in one chain: compute of varied sizes, some host
/// nodes, and a fetch from NVMe every third node (the link's queue).
std::unique_ptr<ir::Graph> program(unsigned n, unsigned seed) {
  std::mt19937 rng(seed);
  std::string text = "graph \"g\" {\n  input %x0 : f32[64]\n";
  std::vector<std::string> sizes(n);
  for (unsigned i = 0; i < n; ++i)
    if (i % 3 == 2) {
      sizes[i] = std::to_string(1024 << (rng() % 8));
      text += "  param %w" + std::to_string(i) + " : f32[" + sizes[i] +
              "] in nvme init \"w" + std::to_string(i) + "\"\n";
    }
  std::string last = "%x0";
  for (unsigned i = 0; i < n; ++i) {
    std::string id = std::to_string(i);
    if (i % 3 == 2) {
      text += "  %c" + id + " : f32[" + sizes[i] + "] in cpu = zinc.Copy(%w" +
              id + ") name \"n" + id + "\" on nvme\n";
      continue;
    }
    std::string y = "%y" + id;
    text += "  " + y + " : f32[64] = Relu(" + last + ") name \"n" + id + "\"" +
            (rng() % 5 == 0 ? " on host" : "") + "\n";
    last = y;
  }
  text += "  output " + last + "\n}\n";
  auto g = ir::parseGraph(text, "walk.zir");
  EXPECT_TRUE(static_cast<bool>(g)) << llvm::toString(g.takeError());
  return g ? std::move(*g) : nullptr;
}

std::vector<ir::Node *> nodesOf(const ir::Graph &g) {
  return {g.nodes().begin(), g.nodes().end()};
}

/// Every user, each need, with and without the queue, with and without a
/// stop, at two caps: the block walk ends where the node walk does.
void expectSameWalks(const ir::Graph &g, const LeadWalk &walk, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<ir::Node *> nodes = nodesOf(g);
  const double needs[] = {0, 1e-6, 3e-5, 1e-3, 0.05, 10};
  size_t checked = 0;
  for (size_t i = 0; i < nodes.size(); i += 3) {
    for (double need : needs)
      for (bool queue : {false, true})
        for (unsigned maxWalk : {4096u, 100u}) {
          LeadWalk::Query q;
          q.user = nodes[i];
          q.stop = rng() % 2 && i > 0 ? nodes[rng() % i] : nullptr;
          q.link = ir::Stream::Nvme;
          q.need = need;
          q.countsQueue = queue;
          q.maxWalk = maxWalk;
          ASSERT_EQ(walk.walk(q), walk.walkNodeByNode(q))
              << "user " << q.user->name << " need " << need << " queue "
              << queue << " cap " << maxWalk;
          ++checked;
        }
  }
  EXPECT_GT(checked, 0u);
}

} // namespace

TEST(LeadWalkTest, SameStopsAsTheNodeWalk) {
  auto g = program(700, 1);
  ASSERT_TRUE(g);
  auto hw = loadHardware("dgx2-v100");
  ASSERT_TRUE(static_cast<bool>(hw)) << llvm::toString(hw.takeError());
  LeadWalk walk(*g, *hw);
  for (ir::Node *n : nodesOf(*g))
    walk.finalize(*n);
  expectSameWalks(*g, walk, 2);
}

TEST(LeadWalkTest, SameStopsAfterInsertedCopies) {
  // Copies inserted among the indexed nodes (as insert-transfers makes
  // them) count in their block: on the link, and towards the cap.
  auto g = program(500, 3);
  ASSERT_TRUE(g);
  auto hw = loadHardware("dgx2-v100");
  ASSERT_TRUE(static_cast<bool>(hw)) << llvm::toString(hw.takeError());
  LeadWalk walk(*g, *hw);
  for (ir::Node *n : nodesOf(*g))
    walk.finalize(*n);
  std::vector<ir::Node *> nodes = nodesOf(*g);
  std::mt19937 rng(4);
  for (unsigned i = 0; i < 300; ++i) {
    ir::Value *w = g->addValue("extra" + std::to_string(i), DType::F32,
                               {static_cast<int64_t>(4096 << (rng() % 6))},
                               ir::ValueRole::Parameter);
    w->tier = ir::Tier::Nvme;
    ir::Value *c = g->addValue("extra" + std::to_string(i) + "@cpu", DType::F32,
                               w->shape, ir::ValueRole::Activation);
    c->tier = ir::Tier::Cpu;
    ir::Node *before = nodes[rng() % nodes.size()];
    ir::Node *copy = g->insertNode(before, "Copy", "copy" + std::to_string(i),
                                   {w}, {c}, {}, "zinc");
    copy->stream = rng() % 2 ? ir::Stream::Nvme : ir::Stream::H2D;
    walk.inserted(*copy, before);
  }
  expectSameWalks(*g, walk, 5);
}

TEST(LeadWalkTest, PassesWholeBlocksOnALongQueue) {
  // A queue that compute never covers: the walk runs to its cap, as the
  // node walk does, passing blocks without a tie to retry.
  auto g = program(2000, 6);
  ASSERT_TRUE(g);
  auto hw = loadHardware("dgx2-v100");
  ASSERT_TRUE(static_cast<bool>(hw)) << llvm::toString(hw.takeError());
  LeadWalk walk(*g, *hw);
  for (ir::Node *n : nodesOf(*g))
    walk.finalize(*n);
  std::vector<ir::Node *> nodes = nodesOf(*g);
  LeadWalk::Query q;
  q.user = nodes.back();
  q.need = 1;
  q.countsQueue = true;
  q.maxWalk = 1000;
  EXPECT_EQ(walk.walk(q), nodes[nodes.size() - 1 - 1000]);
  EXPECT_EQ(walk.walk(q), walk.walkNodeByNode(q));
  EXPECT_EQ(walk.retries(), 0u);
}
