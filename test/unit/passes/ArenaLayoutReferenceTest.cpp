//===- ArenaLayoutReferenceTest.cpp - Packing against the quadratic one ---===//
//
// layoutArena once compared every buffer with every placed one. That
// algorithm is kept here, and only here, as the reference: on small random
// inputs the layout must never need more bytes than it did, and where it
// needs as many, it must be the same layout.
//
//===----------------------------------------------------------------------===//
#include "zinc/passes/ArenaLayout.h"
#include "llvm/Support/MathExtras.h"
#include "gtest/gtest.h"
#include <map>
#include <numeric>
#include <random>

using namespace zinc;

namespace {

/// Places buffers in `order`, each at the best-fitting gap among the
/// buffers already placed that overlap it in time: O(n^2).
ArenaLayout referencePlace(llvm::ArrayRef<BufferInterval> buffers,
                           llvm::ArrayRef<size_t> order, uint64_t alignment) {
  auto extent = [&](const BufferInterval &b) {
    return llvm::alignTo(std::max<uint64_t>(b.size, 1), alignment);
  };
  ArenaLayout layout;
  layout.offsets.assign(buffers.size(), 0);
  std::vector<size_t> placed;
  for (size_t idx : order) {
    const BufferInterval &buf = buffers[idx];
    uint64_t size = extent(buf);
    std::vector<std::pair<uint64_t, uint64_t>> busy;
    for (size_t other : placed) {
      const BufferInterval &o = buffers[other];
      if (o.end < buf.begin || buf.end < o.begin)
        continue;
      busy.push_back(
          {layout.offsets[other], layout.offsets[other] + extent(o)});
    }
    std::sort(busy.begin(), busy.end());
    uint64_t bestOffset = 0, bestGap = UINT64_MAX, cursor = 0;
    bool found = false;
    for (auto [lo, hi] : busy) {
      if (lo > cursor && lo - cursor >= size && lo - cursor < bestGap) {
        bestGap = lo - cursor;
        bestOffset = cursor;
        found = true;
      }
      cursor = std::max(cursor, hi);
    }
    layout.offsets[idx] = found ? bestOffset : cursor;
    layout.peak = std::max(layout.peak, layout.offsets[idx] + size);
    placed.push_back(idx);
  }
  return layout;
}

/// Largest (then longest-lived) first and first-use first; the better.
ArenaLayout referenceLayout(llvm::ArrayRef<BufferInterval> buffers,
                            uint64_t alignment) {
  std::vector<size_t> bySize(buffers.size());
  std::iota(bySize.begin(), bySize.end(), 0);
  std::stable_sort(bySize.begin(), bySize.end(), [&](size_t a, size_t b) {
    if (buffers[a].size != buffers[b].size)
      return buffers[a].size > buffers[b].size;
    return buffers[a].end - buffers[a].begin >
           buffers[b].end - buffers[b].begin;
  });
  std::vector<size_t> byTime(buffers.size());
  std::iota(byTime.begin(), byTime.end(), 0);
  std::stable_sort(byTime.begin(), byTime.end(), [&](size_t a, size_t b) {
    if (buffers[a].begin != buffers[b].begin)
      return buffers[a].begin < buffers[b].begin;
    return buffers[a].size > buffers[b].size;
  });
  ArenaLayout layout = referencePlace(buffers, bySize, alignment);
  ArenaLayout other = referencePlace(buffers, byTime, alignment);
  return other.peak < layout.peak ? other : layout;
}

/// Random buffers of one of several shapes, from `rng`.
std::vector<BufferInterval> randomBuffers(std::mt19937 &rng, int shape) {
  std::vector<BufferInterval> bufs;
  int n = 2 + rng() % 80;
  int64_t span = 1 + rng() % 200;
  int64_t maxLen = 1 + rng() % 40;
  for (int i = 0; i < n; ++i) {
    int64_t begin = rng() % span;
    int64_t len = rng() % maxLen;
    uint64_t size = 1 + rng() % 5000;
    switch (shape) {
    case 0: // Sizes and lifetimes uniform.
      break;
    case 1: // A few sizes, as the tensors of repeated layers.
      size = 512u << (rng() % 4);
      break;
    case 2: // Some buffers live the whole step.
      if (rng() % 4 == 0) {
        begin = 0;
        len = span + maxLen;
      }
      break;
    case 3: // Nested lifetimes, as activations kept for backward.
      begin = i;
      len = 2 * (n - i);
      break;
    }
    bufs.push_back({size, begin, begin + len});
  }
  return bufs;
}

} // namespace

TEST(ArenaLayoutReferenceTest, NeverWorseThanTheQuadraticPacking) {
  std::mt19937 rng(2024);
  int better = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    int shape = trial % 4;
    uint64_t alignment = trial % 5 ? 64 : 4096;
    std::vector<BufferInterval> bufs = randomBuffers(rng, shape);
    ArenaLayout layout = layoutArena(bufs, alignment);
    ArenaLayout reference = referenceLayout(bufs, alignment);
    ASSERT_LE(layout.peak, reference.peak) << "trial " << trial;
    if (layout.peak == reference.peak)
      EXPECT_EQ(layout.offsets, reference.offsets) << "trial " << trial;
    else
      ++better;
  }
  // First fit finds a smaller packing now and then.
  EXPECT_GT(better, 0);
}

TEST(ArenaLayoutReferenceTest, SameLowerBound) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<BufferInterval> bufs = randomBuffers(rng, trial % 4);
    std::map<int64_t, int64_t> delta;
    for (const BufferInterval &b : bufs) {
      int64_t size = llvm::alignTo(std::max<uint64_t>(b.size, 1), 64);
      delta[b.begin] += size;
      delta[b.end + 1] -= size;
    }
    int64_t live = 0, bound = 0;
    for (auto [t, d] : delta) {
      live += d;
      bound = std::max(bound, live);
    }
    EXPECT_EQ(layoutArena(bufs, 64).liveLowerBound,
              static_cast<uint64_t>(bound));
  }
}
