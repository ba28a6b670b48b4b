//===- ArenaLayoutTest.cpp - Static packing never overlaps live buffers ---===//
#include "zinc/passes/ArenaLayout.h"
#include "gtest/gtest.h"
#include <random>

using namespace zinc;

/// The independent check: buffers live at the same time never share bytes.
static void expectNoOverlap(llvm::ArrayRef<BufferInterval> bufs,
                            const ArenaLayout &layout, uint64_t align) {
  for (size_t i = 0; i < bufs.size(); ++i) {
    EXPECT_EQ(layout.offsets[i] % align, 0u);
    EXPECT_LE(layout.offsets[i] + bufs[i].size, layout.peak);
    for (size_t j = i + 1; j < bufs.size(); ++j) {
      bool timeOverlap = !(bufs[i].end < bufs[j].begin || bufs[j].end < bufs[i].begin);
      bool spaceOverlap = layout.offsets[i] < layout.offsets[j] + bufs[j].size &&
                          layout.offsets[j] < layout.offsets[i] + bufs[i].size;
      EXPECT_FALSE(timeOverlap && spaceOverlap) << i << " and " << j;
    }
  }
}

TEST(ArenaLayoutTest, DisjointLifetimesShareSpace) {
  std::vector<BufferInterval> bufs = {{1024, 0, 1}, {1024, 2, 3}};
  ArenaLayout layout = layoutArena(bufs);
  EXPECT_EQ(layout.offsets[0], 0u);
  EXPECT_EQ(layout.offsets[1], 0u);
  EXPECT_EQ(layout.peak, 1024u);
  EXPECT_EQ(layout.liveLowerBound, 1024u);
}

TEST(ArenaLayoutTest, OverlappingLifetimesStack) {
  std::vector<BufferInterval> bufs = {{100, 0, 2}, {200, 1, 3}};
  ArenaLayout layout = layoutArena(bufs, 64);
  // Largest first: the 200-byte buffer (256 aligned) sits at 0.
  EXPECT_EQ(layout.offsets[1], 0u);
  EXPECT_EQ(layout.offsets[0], 256u);
  EXPECT_EQ(layout.peak, 384u);
}

TEST(ArenaLayoutTest, BestFitChoosesTheSmallestHole) {
  // A (0..9) and C (0..9) persist with a 128-byte hole between them left by
  // B (0..1); D (5..6) fits exactly into that hole, not past the end.
  std::vector<BufferInterval> bufs = {
      {512, 0, 9}, {128, 0, 1}, {256, 0, 9}, {128, 5, 6}};
  ArenaLayout layout = layoutArena(bufs, 64);
  expectNoOverlap(bufs, layout, 64);
  EXPECT_EQ(layout.offsets[3], layout.offsets[1]);
  EXPECT_EQ(layout.peak, 512u + 256u + 128u);
}

TEST(ArenaLayoutTest, RandomIntervalsNeverOverlapAndPeakIsNearTheBound) {
  std::mt19937 rng(42);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<BufferInterval> bufs;
    for (int i = 0; i < 60; ++i) {
      int64_t begin = rng() % 100;
      bufs.push_back({1 + rng() % 5000, begin, begin + static_cast<int64_t>(rng() % 20)});
    }
    ArenaLayout layout = layoutArena(bufs, 64);
    expectNoOverlap(bufs, layout, 64);
    EXPECT_GE(layout.peak, layout.liveLowerBound);
  }
}

TEST(ArenaLayoutTest, IsDeterministic) {
  std::vector<BufferInterval> bufs = {{64, 0, 3}, {64, 0, 3}, {64, 2, 5}, {64, 4, 6}};
  EXPECT_EQ(layoutArena(bufs).offsets, layoutArena(bufs).offsets);
}
