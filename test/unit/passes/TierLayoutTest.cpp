//===- TierLayoutTest.cpp - A layout completed from some tiers' packings --===//
#include "zinc/passes/TierLayout.h"
#include "zinc/ir/Parser.h"
#include "gtest/gtest.h"

using namespace zinc;

namespace {

const char *kGraph = R"(graph "g" {
  input %x : f32[64]
  state %s : f32[256] in cpu
  state %n : f32[512] in nvme
  %a : f32[64] = Neg(%x) name "a"
  %b : f32[128] = Concat(%a, %a) name "b" {axis = 0 : int}
  %c : f32[64] = Neg(%a) name "c"
  %h : f32[256] = zinc.Copy(%s) name "h"
  %d : f32[128] = Neg(%b) name "d"
  output %d
})";

TEST(TierLayout, CompletingAPartialLayoutPacksWhatComputingItWhole) {
  auto g = ir::parseGraph(kGraph, "t.zir");
  ASSERT_TRUE(bool(g)) << llvm::toString(g.takeError());
  TierLayout whole = computeTierLayout(**g);
  EXPECT_TRUE(whole.complete());
  for (ir::Tier first : {ir::Tier::Gpu, ir::Tier::Cpu, ir::Tier::Nvme}) {
    TierLayout partial = computeTierLayout(**g, {first});
    EXPECT_FALSE(partial.complete());
    EXPECT_TRUE(partial.packed[static_cast<unsigned>(first)]);
    TierLayout completed = completeTierLayout(**g, partial);
    ASSERT_TRUE(completed.complete());
    for (unsigned t = 0; t < 3; ++t) {
      EXPECT_EQ(completed.peak[t], whole.peak[t]) << "tier " << t;
      EXPECT_EQ(completed.peakTime[t], whole.peakTime[t]) << "tier " << t;
      EXPECT_EQ(completed.liveBound[t], whole.liveBound[t]) << "tier " << t;
    }
    for (const auto &v : (*g)->values())
      EXPECT_EQ(completed.offsets.lookup(v.get()),
                whole.offsets.lookup(v.get()))
          << v->name;
    for (unsigned s = 0; s < kNumStreams; ++s)
      EXPECT_EQ(completed.workspaceOffset[s], whole.workspaceOffset[s]);
  }
  EXPECT_GT(whole.peak[static_cast<unsigned>(ir::Tier::Cpu)], 0u);
  EXPECT_GT(whole.peak[static_cast<unsigned>(ir::Tier::Nvme)], 0u);
}

TEST(TierLayout, APackingTheGraphOutgrewIsPackedAgain) {
  auto g = ir::parseGraph(kGraph, "t.zir");
  ASSERT_TRUE(bool(g)) << llvm::toString(g.takeError());
  TierLayout partial = computeTierLayout(**g, {ir::Tier::Gpu, ir::Tier::Cpu});
  // After the packing: %c is made last, and %h moves from the GPU to NVMe.
  ir::Node *last = nullptr;
  for (ir::Node *n : (*g)->nodes())
    last = n;
  ir::Node *c = (*g)->lookupValue("c")->def;
  (*g)->moveBefore(c, last);
  (*g)->lookupValue("h")->tier = ir::Tier::Nvme;
  TierLayout whole = computeTierLayout(**g);
  TierLayout completed = completeTierLayout(**g, partial);
  for (unsigned t = 0; t < 3; ++t)
    EXPECT_EQ(completed.peak[t], whole.peak[t]) << "tier " << t;
  for (const auto &v : (*g)->values())
    EXPECT_EQ(completed.offsets.lookup(v.get()), whole.offsets.lookup(v.get()))
        << v->name;
  bool stale = false;
  for (const auto &v : (*g)->values())
    stale |= v->tier == ir::Tier::Gpu &&
             partial.offsets.lookup(v.get()) != whole.offsets.lookup(v.get());
  stale |= partial.peak[0] != whole.peak[0];
  EXPECT_TRUE(stale)
      << "the GPU packing made before the change no longer holds";
}

TEST(TierLayout, ATierWhoseLiveBytesOverflowIsNotPacked) {
  auto g = ir::parseGraph(kGraph, "t.zir");
  ASSERT_TRUE(bool(g)) << llvm::toString(g.takeError());
  constexpr unsigned gpu = static_cast<unsigned>(ir::Tier::Gpu);
  TierLayout whole = computeTierLayout(**g, {ir::Tier::Gpu});
  ASSERT_GT(whole.liveBound[gpu], 64u);
  uint64_t workspaces[kNumStreams];
  kernelWorkspaces(**g, workspaces);
  // Below its live bytes: intervals, live bound and busiest instant, no
  // packing.
  TierLayout over =
      layoutTierWithin(**g, ir::Tier::Gpu, workspaces, whole.liveBound[gpu] - 1);
  EXPECT_FALSE(over.packed[gpu]);
  EXPECT_EQ(over.liveBound[gpu], whole.liveBound[gpu]);
  EXPECT_EQ(over.peakTime[gpu], whole.peakTime[gpu]);
  for (const auto &v : (*g)->values()) {
    EXPECT_EQ(over.intervals.at(v.get()).begin, whole.intervals.at(v.get()).begin);
    EXPECT_EQ(over.intervals.at(v.get()).end, whole.intervals.at(v.get()).end);
  }
  // At its live bytes: the packing computeTierLayout makes.
  TierLayout within =
      layoutTierWithin(**g, ir::Tier::Gpu, workspaces, whole.liveBound[gpu]);
  EXPECT_TRUE(within.packed[gpu]);
  EXPECT_EQ(within.peak[gpu], whole.peak[gpu]);
  for (const auto &v : (*g)->values())
    EXPECT_EQ(within.offsets.lookup(v.get()), whole.offsets.lookup(v.get())) << v->name;
  for (unsigned s = 0; s < kNumStreams; ++s)
    EXPECT_EQ(within.workspaceBytes[s], whole.workspaceBytes[s]);
}

} // namespace
