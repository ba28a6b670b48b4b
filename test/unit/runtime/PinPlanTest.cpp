//===- PinPlanTest.cpp - What the cuda backend page-locks, in chunks ------===//
#include "PlanBuilder.h"
#include "zinc/runtime/PinPlan.h"

using namespace zinc;
using namespace zinc::rt;
using namespace zinc::rt::test;

namespace {

constexpr uint64_t KiB = 1024, MiB = 1024 * KiB, GiB = 1024 * MiB;

// Ranges widen to whole 2 MiB units and merge where they then meet; a
// range past the arena is clipped, an empty one locks nothing.
TEST(PinPlan, RangesWidenAndMerge) {
  std::vector<ByteRange> dma = {{5 * MiB, 5 * MiB + 10}, {100, 200},
                                {MiB, 3 * MiB},          {7 * MiB, 7 * MiB},
                                {9 * MiB, 20 * MiB}};
  EXPECT_EQ(planPinnedChunks(dma, 11 * MiB),
            (std::vector<ByteRange>{{0, 6 * MiB}, {8 * MiB, 11 * MiB}}));
}

// A long range is cut into chunks of at most 1 GiB, the last one shorter.
TEST(PinPlan, LongRangesAreChunked) {
  std::vector<ByteRange> chunks = planPinnedChunks({{0, 2 * GiB + 3 * MiB}}, 100 * GiB);
  EXPECT_EQ(chunks, (std::vector<ByteRange>{
                        {0, GiB}, {GiB, 2 * GiB}, {2 * GiB, 2 * GiB + 4 * MiB}}));
  PinChunking small{4 * KiB, 10 * KiB};
  EXPECT_EQ(planPinnedChunks({{KiB, 17 * KiB}}, MiB, small),
            (std::vector<ByteRange>{{0, 8 * KiB}, {8 * KiB, 16 * KiB}, {16 * KiB, 20 * KiB}}));
  EXPECT_TRUE(planPinnedChunks({}, GiB).empty());
}

// A 100 GiB CPU tier whose copies touch a 30 GiB stretch locks 30 chunks,
// not the whole tier.
TEST(PinPlan, OnlyWhatDmaTouchesIsLocked) {
  std::vector<ByteRange> chunks = planPinnedChunks({{70 * GiB, 100 * GiB}}, 100 * GiB);
  ASSERT_EQ(chunks.size(), 30u);
  EXPECT_EQ(chunks.front(), (ByteRange{70 * GiB, 71 * GiB}));
  EXPECT_EQ(chunks.back(), (ByteRange{99 * GiB, 100 * GiB}));
}

// The ranges are those of device-stream copies in the CPU tier: a
// prefetch's source and an eviction's destination, not the host
// optimizer's states.
TEST(PinPlan, DmaRangesAreTheDeviceCopies) {
  PlanBuilder b;
  b.setAlignment(plan::TIER_CPU, 4096);
  int w = b.tensor("w", {1024}, plan::TIER_CPU, 1, plan::ROLE_PARAMETER);
  int m = b.tensor("m", {1024}, plan::TIER_CPU, 1, plan::ROLE_STATE);
  int g = b.tensor("g", {1024}, plan::TIER_CPU);
  int wGpu = b.tensor("w.gpu", {1024}), gGpu = b.tensor("g.gpu", {1024});
  b.add("fetch", "Copy", {w}, {wGpu}, plan::STREAM_H2D);
  b.add("evict", "CopyInto", {gGpu, g}, {}, plan::STREAM_D2H);
  b.add("adam", "AdamW", {w, g, m}, {}, plan::STREAM_HOST);
  std::unique_ptr<Program> program = loadOrFail(b.finish());
  ASSERT_TRUE(program);
  std::vector<ByteRange> ranges = cpuTierDmaRanges(*program);
  EXPECT_EQ(ranges, (std::vector<ByteRange>{{0, 4096}, {8192, 12288}}));
}

} // namespace
