//===- ArenaLayout.cpp - Best-fit static packing of live intervals --------===//
#include "zinc/passes/ArenaLayout.h"
#include "llvm/Support/MathExtras.h"
#include <algorithm>
#include <map>
#include <numeric>

namespace zinc {

/// Places buffers in `order`, each at the best-fitting gap among the
/// buffers already placed that overlap it in time.
static ArenaLayout placeInOrder(llvm::ArrayRef<BufferInterval> buffers,
                                llvm::ArrayRef<size_t> order, uint64_t alignment) {
  ArenaLayout layout;
  layout.offsets.assign(buffers.size(), 0);
  std::vector<size_t> placed;
  for (size_t idx : order) {
    const BufferInterval &buf = buffers[idx];
    uint64_t size = llvm::alignTo(std::max<uint64_t>(buf.size, 1), alignment);
    // Occupied ranges of buffers whose lifetime overlaps this one.
    std::vector<std::pair<uint64_t, uint64_t>> busy;
    for (size_t other : placed) {
      const BufferInterval &o = buffers[other];
      if (o.end < buf.begin || buf.end < o.begin)
        continue;
      busy.push_back({layout.offsets[other],
                      layout.offsets[other] +
                          llvm::alignTo(std::max<uint64_t>(o.size, 1), alignment)});
    }
    std::sort(busy.begin(), busy.end());
    // Best fit: the smallest gap that holds the buffer; else past the end.
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

ArenaLayout layoutArena(llvm::ArrayRef<BufferInterval> buffers,
                        uint64_t alignment) {
  std::vector<size_t> bySize(buffers.size());
  std::iota(bySize.begin(), bySize.end(), 0);
  // Big and long-lived first: they constrain the packing most.
  std::stable_sort(bySize.begin(), bySize.end(), [&](size_t a, size_t b) {
    if (buffers[a].size != buffers[b].size)
      return buffers[a].size > buffers[b].size;
    return buffers[a].end - buffers[a].begin > buffers[b].end - buffers[b].begin;
  });
  // In time order: what a running allocator would do; it wins when many
  // short-lived buffers of mixed sizes follow each other.
  std::vector<size_t> byTime(buffers.size());
  std::iota(byTime.begin(), byTime.end(), 0);
  std::stable_sort(byTime.begin(), byTime.end(), [&](size_t a, size_t b) {
    if (buffers[a].begin != buffers[b].begin)
      return buffers[a].begin < buffers[b].begin;
    return buffers[a].size > buffers[b].size;
  });
  ArenaLayout layout = placeInOrder(buffers, bySize, alignment);
  ArenaLayout other = placeInOrder(buffers, byTime, alignment);
  if (other.peak < layout.peak)
    layout = std::move(other);

  // Sweep for the largest live sum, the bound no packing can beat.
  std::map<int64_t, int64_t> delta;
  for (const BufferInterval &b : buffers) {
    int64_t size = llvm::alignTo(std::max<uint64_t>(b.size, 1), alignment);
    delta[b.begin] += size;
    delta[b.end + 1] -= size;
  }
  int64_t live = 0;
  for (auto [t, d] : delta) {
    live += d;
    layout.liveLowerBound = std::max<uint64_t>(layout.liveLowerBound, live);
  }
  return layout;
}

} // namespace zinc
