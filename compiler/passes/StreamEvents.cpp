//===- StreamEvents.cpp - Events from per-tier shadow memory --------------===//
#include "zinc/passes/StreamEvents.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MathExtras.h"
#include <algorithm>
#include <array>
#include <memory>
#include <tuple>

namespace zinc {

namespace {
/// An instruction's access to a value's bytes, as the range [lo, hi) of its
/// tier's shadow segments.
struct SegmentAccess {
  ir::Tier tier;
  bool write;
  uint32_t lo, hi;
};

/// Over n slots: raise a range to at least v, and the maximum of a range,
/// both O(log n). A raise tags the nodes that cover its range exactly and
/// lifts the maxima of their ancestors; a query reads the maxima of the
/// nodes covering its range and the tags of their ancestors.
class RangeMax {
public:
  explicit RangeMax(size_t n)
      : leaves(llvm::PowerOf2Ceil(std::max<size_t>(n, 1))), tag(2 * leaves, -1),
        below(2 * leaves, -1) {}

  void raise(size_t lo, size_t hi, int32_t v) {
    for (size_t a = lo + leaves, b = hi + leaves; a < b; a >>= 1, b >>= 1) {
      if (a & 1)
        lift(a++, v);
      if (b & 1)
        lift(--b, v);
    }
    // Every ancestor of those nodes holds leaf lo or leaf hi - 1.
    for (size_t a = (lo + leaves) >> 1; a; a >>= 1)
      below[a] = std::max(below[a], v);
    for (size_t a = (hi - 1 + leaves) >> 1; a; a >>= 1)
      below[a] = std::max(below[a], v);
  }

  /// -1 when nothing in [lo, hi) was raised.
  int32_t max(size_t lo, size_t hi) const {
    int32_t result = -1;
    for (size_t a = lo + leaves, b = hi + leaves; a < b; a >>= 1, b >>= 1) {
      if (a & 1)
        result = std::max(result, below[a++]);
      if (b & 1)
        result = std::max(result, below[--b]);
    }
    for (size_t a = (lo + leaves) >> 1; a; a >>= 1)
      result = std::max(result, tag[a]);
    for (size_t a = (hi - 1 + leaves) >> 1; a; a >>= 1)
      result = std::max(result, tag[a]);
    return result;
  }

private:
  void lift(size_t node, int32_t v) {
    tag[node] = std::max(tag[node], v);
    below[node] = std::max(below[node], v);
  }

  size_t leaves;
  /// tag: raised over the node's whole range; below: the most raised
  /// anywhere in it.
  std::vector<int32_t> tag, below;
};

constexpr int kStreams = 6;
constexpr int kTiers = 3;

/// Shadow memory of one tier: for each stream, the latest instruction that
/// wrote and that touched (read or wrote) each byte, over the segments
/// between the tier's tensor boundaries.
class TierShadow {
public:
  /// Each access's [begin, end) must start and end at one of `bounds`.
  explicit TierShadow(std::vector<uint64_t> bounds)
      : bounds(std::move(bounds)) {
    llvm::sort(this->bounds);
    this->bounds.erase(std::unique(this->bounds.begin(), this->bounds.end()),
                       this->bounds.end());
  }

  /// The segments of bytes [begin, end): looked up once per value, not
  /// once per access or stream queried.
  std::pair<uint32_t, uint32_t> segments(uint64_t begin, uint64_t end) const {
    return {static_cast<uint32_t>(llvm::lower_bound(bounds, begin) - bounds.begin()),
            static_cast<uint32_t>(llvm::lower_bound(bounds, end) - bounds.begin())};
  }

  /// The latest instruction on stream `t` whose access conflicts with `a`
  /// (overlaps it, one of them writing), or -1.
  int32_t latestConflict(const SegmentAccess &a, int t) const {
    const std::unique_ptr<RangeMax> &by = a.write ? touched[t] : written[t];
    if (!by)
      return -1;
    return by->max(a.lo, a.hi);
  }

  void record(const SegmentAccess &a, int stream, int32_t inst) {
    auto get = [&](std::unique_ptr<RangeMax> &by) -> RangeMax & {
      if (!by)
        by = std::make_unique<RangeMax>(bounds.size());
      return *by;
    };
    get(touched[stream]).raise(a.lo, a.hi, inst);
    if (a.write)
      get(written[stream]).raise(a.lo, a.hi, inst);
  }

private:

  std::vector<uint64_t> bounds;
  /// Per stream, made when the stream first touches the tier.
  std::array<std::unique_ptr<RangeMax>, kStreams> written, touched;
};
} // namespace

StreamEvents synchronizeStreams(const ir::Graph &g, const TierLayout &layout) {
  StreamEvents events;
  // One walk over the nodes (each a cache miss on a big graph) gathers
  // what the rest reads: each instruction's stream and accesses by value
  // id, and each value's bytes the first time it is seen (a value is
  // accessed by its writer and each reader, all at the same range).
  struct ValueBytes {
    uint64_t begin = 0, end = 0;
    uint32_t lo = 0, hi = 0;
    ir::Tier tier = ir::Tier::Gpu;
    bool seen = false;
  };
  struct Access {
    uint32_t value;
    bool write;
  };
  std::vector<ValueBytes> bytesOf(g.valueIdBound());
  std::vector<uint32_t> touched;
  std::vector<uint64_t> bounds[kTiers];
  std::vector<ir::Stream> streamOf;
  streamOf.reserve(g.numNodes());
  // Instruction i's accesses are accesses[first[i], first[i + 1]).
  std::vector<Access> accesses;
  std::vector<uint32_t> first;
  first.reserve(g.numNodes() + 1);
  auto add = [&](const ir::Value *v, bool write) {
    ValueBytes &b = bytesOf[v->id];
    accesses.push_back({v->id, write});
    if (b.seen)
      return;
    b.seen = true;
    b.tier = v->tier;
    b.begin = layout.offsets.lookup(v);
    b.end = b.begin + llvm::alignTo(std::max<uint64_t>(v->byteSize(), 1),
                                    tierAlignment(v->tier));
    touched.push_back(v->id);
    unsigned tier = static_cast<unsigned>(v->tier);
    bounds[tier].push_back(b.begin);
    bounds[tier].push_back(b.end);
  };
  for (const ir::Node *n : g.nodes()) {
    first.push_back(static_cast<uint32_t>(accesses.size()));
    streamOf.push_back(n->stream);
    const OpEffects &effects = n->effects(); // A table lookup: once a node.
    for (unsigned k = 0; k < n->inputs.size(); ++k)
      if (n->inputs[k])
        add(n->inputs[k], effects.writesInput(k));
    for (const ir::Value *out : n->outputs)
      if (out)
        add(out, true);
  }
  first.push_back(static_cast<uint32_t>(accesses.size()));
  std::vector<TierShadow> shadows;
  for (std::vector<uint64_t> &b : bounds)
    shadows.emplace_back(std::move(b));
  for (uint32_t id : touched) {
    ValueBytes &b = bytesOf[id];
    std::tie(b.lo, b.hi) =
        shadows[static_cast<unsigned>(b.tier)].segments(b.begin, b.end);
  }
  std::vector<SegmentAccess> spans;
  spans.reserve(accesses.size());
  for (const Access &a : accesses) {
    const ValueBytes &b = bytesOf[a.value];
    spans.push_back({b.tier, a.write, b.lo, b.hi});
  }
  accesses = {};
  auto accessesOf = [&](size_t i) {
    return llvm::makeArrayRef(spans).slice(first[i], first[i + 1] - first[i]);
  };

  // Instruction indices, as the shadows hold them: 32 bits (a clock per
  // instruction is kept).
  using Clock = std::array<int32_t, kStreams>;
  // waited[s][t]: the latest instruction of stream t that stream s is
  // already ordered after.
  std::array<Clock, kStreams> waited;
  for (Clock &w : waited)
    w.fill(-1);
  const size_t numInstructions = streamOf.size();
  std::vector<int> eventOf(numInstructions, -1);
  // clock[i]: what instruction i is ordered after, per stream (a vector
  // clock taken when it was issued).
  std::vector<Clock> clock(numInstructions);
  // lastOf[t]: stream t's latest instruction so far. A stream with none
  // since s last waited on it cannot hold a conflict s must wait for.
  Clock lastOf;
  lastOf.fill(-1);
  for (size_t i = 0; i < numInstructions; ++i) {
    int s = static_cast<int>(streamOf[i]);
    int32_t latest[kStreams];
    for (int t = 0; t < kStreams; ++t) {
      latest[t] = -1;
      if (t != s && lastOf[t] > waited[s][t])
        for (const SegmentAccess &a : accessesOf(i))
          latest[t] = std::max(
              latest[t],
              shadows[static_cast<unsigned>(a.tier)].latestConflict(a, t));
    }
    for (int t = 0; t < kStreams; ++t) {
      int32_t j = latest[t];
      if (t == s || j <= waited[s][t])
        continue;
      if (eventOf[j] < 0) {
        eventOf[j] = events.numEvents++;
        events.signals.push_back({static_cast<uint32_t>(j), static_cast<uint32_t>(eventOf[j])});
      }
      events.waits.push_back({static_cast<uint32_t>(i), static_cast<uint32_t>(eventOf[j])});
      // Everything that instruction was ordered after is ordered too.
      for (int u = 0; u < kStreams; ++u)
        waited[s][u] = std::max(waited[s][u], clock[j][u]);
      waited[s][t] = j;
    }
    waited[s][s] = static_cast<int32_t>(i);
    lastOf[s] = static_cast<int32_t>(i);
    clock[i] = waited[s];
    for (const SegmentAccess &a : accessesOf(i))
      shadows[static_cast<unsigned>(a.tier)].record(a, s,
                                                    static_cast<int32_t>(i));
  }
  return events;
}

std::future<StreamEvents> synchronizeStreamsAsync(const ir::Graph &g,
                                                  const TierLayout &layout) {
  // A thread costs more than the events of a few thousand instructions.
  constexpr size_t kNodesWorthAThread = 8192;
  return std::async(g.numNodes() >= kNodesWorthAThread ? std::launch::async
                                                       : std::launch::deferred,
                    [&g, &layout] { return synchronizeStreams(g, layout); });
}

} // namespace zinc
