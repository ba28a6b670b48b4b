//===- ArenaLayout.cpp - Best-fit static packing of live intervals --------===//
//
// Three packings, the best kept:
//  1. By size, best fit: largest buffers first, each in the smallest gap left
//     by the placed buffers whose lifetimes overlap its own.
//  2. By time, best fit: a running allocator, in order of first use.
//  3. By size, first fit: as 1, but in the lowest gap that holds it.
// 1 and 2 are the packings zinc always made (1 kept unless 2 is strictly
// smaller), offset for offset, so a layout is never worse than theirs; 3
// replaces them only where it is strictly smaller. Once a packing reaches
// the live lower bound the others are skipped: nothing can beat it. On
// arenas of many buffers, 3 is skipped too once 1 is within 1/4096 of the
// bound (the margin the sweep is taken at). A packing's peak only grows as
// it places buffers, so a size order stops as soon as its peak passes the
// one it has to beat: on a large arena the sweep has usually set it, and a
// packing fragmenting badly there costs a fraction of a full one. On such
// arenas 3 packs on a second thread while 1 does, and is stopped if 1
// turns out near the bound: the layout is the same as one after the other.
//
// None compares a buffer with every placed one. The sweep (2) sees only the
// buffers live at the instant a buffer starts and keeps their gaps in a set
// ordered by size: O(log n) a buffer. The size orders (1, 3) keep the placed
// buffers in a segment tree over time (OccupancyTree): a window meets
// O(log n) nodes, each holding the union of the byte ranges placed there as
// merged runs, so a placement reads the runs of the union, not the buffers
// under it. A well-packed union has few runs: about 60 read or moved a
// buffer on training graphs of 10^5 buffers. A union fragmented into nearly
// as many runs as buffers would make that quadratic, so the size orders give
// up past a budget of 32 n log n runs and leave the layout to the sweep.
//
//===----------------------------------------------------------------------===//
#include "zinc/passes/ArenaLayout.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/Optional.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/MathExtras.h"
#include <algorithm>
#include <atomic>
#include <cassert>
#include <future>
#include <map>
#include <numeric>
#include <set>
#include <thread>

namespace zinc {

static uint64_t extentOf(const BufferInterval &b, uint64_t alignment) {
  return llvm::alignTo(std::max<uint64_t>(b.size, 1), alignment);
}

namespace {

/// A byte range [lo, hi).
struct Run {
  uint64_t lo, hi;
};

/// Disjoint, non-adjacent runs in address order: the union of the byte
/// ranges added.
class RunSet {
public:
  bool empty() const { return runs.empty(); }
  llvm::ArrayRef<Run> get() const { return runs; }

  /// Returns the runs it moved.
  size_t add(uint64_t lo, uint64_t hi) {
    // The runs that touch [lo, hi) (or abut it) merge into one.
    auto first =
        std::lower_bound(runs.begin(), runs.end(), lo,
                         [](const Run &r, uint64_t x) { return r.hi < x; });
    auto last =
        std::upper_bound(first, runs.end(), hi,
                         [](uint64_t x, const Run &r) { return x < r.lo; });
    size_t moved = runs.end() - first;
    if (first == last) {
      runs.insert(first, Run{lo, hi});
      return moved;
    }
    first->lo = std::min(first->lo, lo);
    first->hi = std::max(std::prev(last)->hi, hi);
    runs.erase(std::next(first), last);
    return moved;
  }

  /// The first run that ends after `at`.
  const Run *firstEndingAfter(uint64_t at) const {
    auto it =
        std::upper_bound(runs.begin(), runs.end(), at,
                         [](uint64_t x, const Run &r) { return x < r.hi; });
    return it == runs.end() ? nullptr : &*it;
  }

private:
  llvm::SmallVector<Run, 1> runs;
};

enum class FitKind { Best, First };

/// Buffers placed so far as rectangles of time x bytes, in a segment tree
/// over the distinct times. A buffer's window [begin, end] decomposes into
/// canonical nodes; `own` of a node holds the buffers for which it is
/// canonical, `sub` the buffers canonical anywhere in its subtree. The
/// buffers overlapping a window are then those in `sub` of its canonical
/// nodes and in `own` of their ancestors: O(log n) sets.
class OccupancyTree {
public:
  explicit OccupancyTree(llvm::ArrayRef<BufferInterval> buffers) {
    for (const BufferInterval &b : buffers) {
      times.push_back(b.begin);
      times.push_back(b.end);
    }
    llvm::sort(times);
    times.erase(std::unique(times.begin(), times.end()), times.end());
    // One spare leaf each side, so every window has a leaf before and after.
    leaves = llvm::PowerOf2Ceil(times.size() + 2);
    nodes.resize(2 * leaves);
    // Only nodes canonical for some window are ever asked for `sub`; most
    // ancestors are not, and hold no `own` either: two bits keep the walks
    // from touching them.
    queried.resize(2 * leaves);
    hasOwn.resize(2 * leaves);
    for (const BufferInterval &b : buffers)
      forEachCanonical(leafOf(b.begin), leafOf(b.end) + 1,
                       [&](size_t c) { queried.set(c); });
  }

  /// Places a buffer of `size` bytes live over [begin, end] and returns its
  /// offset: the gap that `fit` picks among those the buffers placed so far
  /// leave free over the whole window, or the top of them.
  uint64_t place(int64_t begin, int64_t end, uint64_t size, FitKind fit) {
    size_t lo = leafOf(begin), hi = leafOf(end) + 1;
    canonical.clear();
    forEachCanonical(lo, hi, [&](size_t c) { canonical.push_back(c); });
    sets.clear();
    for (size_t c : canonical)
      if (!nodes[c].sub.empty())
        sets.push_back(&nodes[c].sub);
    forEachAncestor(lo, hi, [&](size_t u) {
      if (hasOwn.test(u))
        sets.push_back(&nodes[u].own);
    });
    uint64_t offset = fit == FitKind::Best ? bestFit(size) : firstFit(size);
    for (size_t c : canonical) {
      work += nodes[c].own.add(offset, offset + size);
      work += nodes[c].sub.add(offset, offset + size);
      hasOwn.set(c);
    }
    forEachAncestor(lo, hi, [&](size_t u) {
      if (queried.test(u))
        work += nodes[u].sub.add(offset, offset + size);
    });
    return offset;
  }

  /// Runs read or moved so far: what a placement costs beyond its O(log n)
  /// nodes.
  uint64_t workDone() const { return work; }

private:
  struct Node {
    RunSet own, sub;
  };

  size_t leafOf(int64_t time) const {
    return llvm::lower_bound(times, time) - times.begin() + leaves + 1;
  }

  /// Calls `fn` on the nodes that exactly cover leaves [lo, hi).
  template <typename Fn>
  static void forEachCanonical(size_t lo, size_t hi, Fn fn) {
    for (; lo < hi; lo >>= 1, hi >>= 1) {
      if (lo & 1)
        fn(lo++);
      if (hi & 1)
        fn(--hi);
    }
  }

  /// Calls `fn` on each strict ancestor of the canonical nodes of leaves
  /// [lo, hi): the nodes that meet the window without lying inside it. They
  /// hold leaf lo - 1 or leaf hi, so they are on those two paths to the
  /// root.
  template <typename Fn> void forEachAncestor(size_t lo, size_t hi, Fn fn) {
    unsigned level = 1;
    for (size_t u = (lo - 1) >> 1, v = hi >> 1; u; u >>= 1, v >>= 1, ++level) {
      // Node x at `level` spans leaves [x << level, (x + 1) << level).
      if (((u + 1) << level) > lo)
        fn(u);
      if (v != u && (v << level) < hi)
        fn(v);
    }
  }

  /// The smallest gap of the union of `sets` that holds `size` bytes (the
  /// lowest of equal ones), or the top of the union: the same gaps, in the
  /// same order, as a scan of the overlapping buffers themselves.
  uint64_t bestFit(uint64_t size) {
    // Each set is in address order already: merged through a heap of the
    // sets' next runs rather than sorted together. (Among runs that begin
    // at one address the order does not matter: after the first, the
    // others begin below the cursor.)
    heads.clear();
    for (const RunSet *s : sets) {
      llvm::ArrayRef<Run> r = s->get();
      work += r.size();
      if (!r.empty())
        heads.push_back(r);
    }
    auto later = [](llvm::ArrayRef<Run> a, llvm::ArrayRef<Run> b) {
      return a.front().lo > b.front().lo;
    };
    std::make_heap(heads.begin(), heads.end(), later);
    uint64_t best = 0, bestGap = UINT64_MAX, cursor = 0;
    bool found = false;
    while (!heads.empty()) {
      std::pop_heap(heads.begin(), heads.end(), later);
      llvm::ArrayRef<Run> &rest = heads.back();
      const Run &r = rest.front();
      if (r.lo > cursor && r.lo - cursor >= size && r.lo - cursor < bestGap) {
        bestGap = r.lo - cursor;
        best = cursor;
        found = true;
      }
      cursor = std::max(cursor, r.hi);
      rest = rest.drop_front();
      if (rest.empty())
        heads.pop_back();
      else
        std::push_heap(heads.begin(), heads.end(), later);
    }
    return found ? best : cursor;
  }

  /// The lowest offset where `size` bytes meet no run of any of `sets`.
  uint64_t firstFit(uint64_t size) {
    uint64_t at = 0;
    for (bool moved = true; moved;) {
      moved = false;
      for (const RunSet *s : sets) {
        ++work;
        for (const Run *r = s->firstEndingAfter(at); r && r->lo < at + size;
             r = s->firstEndingAfter(at)) {
          ++work;
          at = r->hi;
          moved = true;
        }
      }
    }
    return at;
  }

  std::vector<int64_t> times;
  size_t leaves = 0;
  std::vector<Node> nodes;
  llvm::BitVector queried, hasOwn;
  uint64_t work = 0;
  // Scratch, kept to reuse the allocations.
  llvm::SmallVector<size_t, 64> canonical;
  llvm::SmallVector<const RunSet *, 64> sets;
  llvm::SmallVector<llvm::ArrayRef<Run>, 64> heads;
};

/// The buffers live at one instant of a sweep in time order, with the gaps
/// between them by size. Buffers live at the same instant are disjoint, so
/// the gaps below each one are all the free space under the top.
class LiveGaps {
public:
  /// Best fit: the offset of the smallest gap that holds `size` bytes (the
  /// lowest of equal ones), else the top.
  uint64_t allocate(uint64_t size) {
    auto gap = gaps.lower_bound({size, 0});
    uint64_t offset;
    if (gap != gaps.end()) {
      auto [length, start] = *gap;
      gaps.erase(gap);
      if (length > size)
        gaps.insert({length - size, start + size});
      offset = start;
    } else {
      offset = live.empty() ? 0 : std::prev(live.end())->second;
    }
    live.emplace(offset, offset + size);
    return offset;
  }

  void release(uint64_t offset) {
    auto it = live.find(offset);
    assert(it != live.end() && "releasing a buffer that is not live");
    eraseGapBelow(it);
    auto next = std::next(it);
    if (next != live.end())
      eraseGapBelow(next);
    live.erase(it);
    if (next != live.end()) {
      auto [start, length] = gapBelow(next);
      if (length)
        gaps.insert({length, start});
    }
  }

private:
  using LiveMap = std::map<uint64_t, uint64_t>;

  /// (start, length) of the free bytes just under `it`.
  std::pair<uint64_t, uint64_t> gapBelow(LiveMap::iterator it) const {
    uint64_t start = it == live.begin() ? 0 : std::prev(it)->second;
    return {start, it->first - start};
  }
  void eraseGapBelow(LiveMap::iterator it) {
    auto [start, length] = gapBelow(it);
    if (length)
      gaps.erase({length, start});
  }

  /// offset -> end of each live buffer.
  LiveMap live;
  /// (length, offset) of each gap between live buffers.
  std::set<std::pair<uint64_t, uint64_t>> gaps;
};

} // namespace

/// None when the packing gives up, past its budget of runs read or moved
/// (the layouts of the test suite and of training graphs of 10^5 buffers
/// use a quarter of it at most), or once its peak passes `ceiling`: a
/// packing's peak only grows as buffers are placed, so past the peak of
/// one it must beat, it has lost. The ceiling may be lowered while it runs
/// (on another thread) as that one becomes known.
static llvm::Optional<ArenaLayout>
packBySize(llvm::ArrayRef<BufferInterval> buffers, uint64_t alignment,
           FitKind fit, const std::atomic<uint64_t> &ceiling) {
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), 0);
  // Big and long-lived first: they constrain the packing most.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (buffers[a].size != buffers[b].size)
      return buffers[a].size > buffers[b].size;
    return buffers[a].end - buffers[a].begin >
           buffers[b].end - buffers[b].begin;
  });
  ArenaLayout layout;
  layout.offsets.assign(buffers.size(), 0);
  OccupancyTree placed(buffers);
  uint64_t n = buffers.size();
  uint64_t budget = (uint64_t(1) << 20) + 32 * n * llvm::Log2_64_Ceil(n + 1);
  for (size_t idx : order) {
    const BufferInterval &b = buffers[idx];
    uint64_t size = extentOf(b, alignment);
    layout.offsets[idx] = placed.place(b.begin, b.end, size, fit);
    layout.peak = std::max(layout.peak, layout.offsets[idx] + size);
    if (placed.workDone() > budget ||
        layout.peak > ceiling.load(std::memory_order_relaxed))
      return llvm::None;
  }
  return layout;
}

/// What a running allocator would do; it wins when many short-lived
/// buffers of mixed sizes follow each other.
static ArenaLayout packByTime(llvm::ArrayRef<BufferInterval> buffers,
                              uint64_t alignment) {
  std::vector<size_t> byBegin(buffers.size());
  std::iota(byBegin.begin(), byBegin.end(), 0);
  std::stable_sort(byBegin.begin(), byBegin.end(), [&](size_t a, size_t b) {
    if (buffers[a].begin != buffers[b].begin)
      return buffers[a].begin < buffers[b].begin;
    return buffers[a].size > buffers[b].size;
  });
  std::vector<size_t> byEnd(buffers.size());
  std::iota(byEnd.begin(), byEnd.end(), 0);
  llvm::sort(byEnd, [&](size_t a, size_t b) {
    return buffers[a].end != buffers[b].end ? buffers[a].end < buffers[b].end
                                            : a < b;
  });
  ArenaLayout layout;
  layout.offsets.assign(buffers.size(), 0);
  LiveGaps gaps;
  size_t ended = 0;
  for (size_t idx : byBegin) {
    const BufferInterval &b = buffers[idx];
    // What ended before this one begins (so began before it, and is placed)
    // frees its bytes.
    for (; ended < byEnd.size() && buffers[byEnd[ended]].end < b.begin; ++ended)
      gaps.release(layout.offsets[byEnd[ended]]);
    uint64_t size = extentOf(b, alignment);
    layout.offsets[idx] = gaps.allocate(size);
    layout.peak = std::max(layout.peak, layout.offsets[idx] + size);
  }
  return layout;
}

/// Arenas of at least this many buffers try the sweep in time order first.
static constexpr size_t kManyBuffers = 8192;
/// ... and keep it when it is within this fraction of the live bound.
static constexpr uint64_t kNearBoundFraction = 4096;
/// A sweep further than this fraction from the bound mostly means a best
/// fit not near it either, so first fit is worth starting beside it; where
/// that is wrong, the second thread is stopped when best fit ends.
static constexpr uint64_t kFarFromBoundFraction = 256;

ArenaLayout layoutArena(llvm::ArrayRef<BufferInterval> buffers,
                        uint64_t alignment) {
  assert(
      llvm::all_of(buffers,
                   [](const BufferInterval &b) { return b.begin <= b.end; }) &&
      "a buffer's interval ends before it begins");
  // Sweep for the largest live sum, the bound no packing can beat.
  std::vector<std::pair<int64_t, int64_t>> delta;
  delta.reserve(2 * buffers.size());
  for (const BufferInterval &b : buffers) {
    int64_t size = extentOf(b, alignment);
    delta.push_back({b.begin, size});
    delta.push_back({b.end + 1, -size});
  }
  llvm::sort(delta);
  uint64_t bound = 0;
  int64_t live = 0;
  for (size_t i = 0; i < delta.size(); ++i) {
    live += delta[i].second;
    if (i + 1 == delta.size() || delta[i + 1].first != delta[i].first)
      bound = std::max<uint64_t>(bound, live);
  }

  // On arenas of many buffers, the sweep in time order costs a tenth of
  // best fit and lands within a few KiB of the bound (training graphs of
  // 10^5 buffers: 12 KiB over 700 MB). Taking it when it is within
  // 1/kNearBoundFraction of the bound saves most of a second per tier;
  // small arenas, and large ones the sweep packs badly, go to best fit.
  llvm::Optional<ArenaLayout> byTime;
  if (buffers.size() >= kManyBuffers) {
    byTime = packByTime(buffers, alignment);
    if (byTime->peak - bound <= bound / kNearBoundFraction) {
      byTime->liveLowerBound = bound;
      return std::move(*byTime);
    }
  }
  // First fit replaces the best of the others only when strictly smaller
  // than both. Where the sweep is far from the bound, best fit likely is
  // too, and first fit will be wanted: it packs on a second thread
  // meanwhile, under the sweep's peak, then under best fit's once known,
  // or is stopped when not wanted after all.
  std::atomic<uint64_t> firstCeiling{UINT64_MAX};
  std::future<llvm::Optional<ArenaLayout>> firstFit;
  if (byTime && byTime->peak - bound > bound / kFarFromBoundFraction &&
      std::thread::hardware_concurrency() > 1) {
    firstCeiling = byTime->peak - 1;
    firstFit = std::async(std::launch::async, [&] {
      return packBySize(buffers, alignment, FitKind::First, firstCeiling);
    });
  }
  // Best fit is kept unless the sweep is strictly smaller: past the
  // sweep's peak it has lost.
  const std::atomic<uint64_t> bestCeiling{byTime ? byTime->peak : UINT64_MAX};
  llvm::Optional<ArenaLayout> layout =
      packBySize(buffers, alignment, FitKind::Best, bestCeiling);
  auto keepIfSmaller = [&](llvm::Optional<ArenaLayout> other) {
    if (other && (!layout || other->peak < layout->peak))
      layout = std::move(other);
  };
  auto optimal = [&] { return layout && layout->peak <= bound; };
  if (byTime)
    keepIfSmaller(std::move(byTime));
  else if (!optimal())
    keepIfSmaller(packByTime(buffers, alignment));
  // First fit is a second opinion: not worth another packing of a big
  // arena once best fit is as near the bound as the sweep must be.
  bool nearBound = buffers.size() >= kManyBuffers && layout &&
                   layout->peak - bound <= bound / kNearBoundFraction;
  bool wantFirst = !optimal() && !nearBound;
  if (firstFit.valid()) {
    firstCeiling = wantFirst ? layout->peak - 1 : 0;
    llvm::Optional<ArenaLayout> first = firstFit.get();
    if (wantFirst)
      keepIfSmaller(std::move(first));
  } else if (wantFirst) {
    firstCeiling = layout->peak - 1;
    keepIfSmaller(
        packBySize(buffers, alignment, FitKind::First, firstCeiling));
  }
  layout->liveLowerBound = bound;
  return std::move(*layout);
}

} // namespace zinc
