//===- Spill.cpp - spill: what stops being kept when the GPU tier overflows ===//
//
// Runs after insert-transfers, ahead of allocate. When the GPU tier's packed
// peak exceeds its capacity, activations that sit idle across the peak stop
// being kept: recomputed just before their next use when their node is cheap
// and its inputs are at hand anyway (rematerialisation), else spilled:
// evicted to the CPU after their last use before the peak and fetched back
// ahead of the next (the activation offloading of ZeRO-Offload).
//
// Each round lays the tiers out once (TierLayout, O(n log n)) and relieves
// the peak instant by as many live bytes as it overflows, biggest idle values
// first; rounds stop when the GPU fits, nothing idle is left at the peak,
// a few rounds in a row stopped lowering it, or after kMaxRounds. allocate
// then proves the result fits, or says what would.
//
//===----------------------------------------------------------------------===//
#include "zinc/passes/Pass.h"
#include "zinc/passes/TierLayout.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

namespace zinc::passes {
namespace {

class Spill : public Pass {
public:
  llvm::StringRef getName() const override { return "Rematerialise or Spill"; }
  llvm::StringRef getArgument() const override { return "spill"; }
  llvm::Expected<bool> run(ir::Graph &g, PassContext &ctx) override;
};

/// Program positions for one round: node i of the snapshot is at 4i; a node
/// inserted during the round before node i is at 4i - 1, so positions stay
/// ordered without renumbering.
class Positions {
public:
  explicit Positions(const ir::Graph &g) {
    for (ir::Node *n : g.nodes()) {
      pos[n] = 4 * static_cast<int64_t>(order.size());
      order.push_back(n);
    }
  }
  int64_t of(const ir::Node *n) const { return pos.lookup(n); }
  /// The snapshot node at index i (in TierLayout's time), or null past the end.
  ir::Node *at(size_t i) const { return i < order.size() ? order[i] : nullptr; }
  void inserted(const ir::Node *n, const ir::Node *before) {
    pos[n] = before ? pos.lookup(before) - 1 : 4 * static_cast<int64_t>(order.size());
  }

private:
  std::vector<ir::Node *> order;
  llvm::DenseMap<const ir::Node *, int64_t> pos;
};

/// A GPU activation idle across `time`: its last use before and first use
/// after, as snapshot indices.
struct SpillCandidate {
  ir::Value *value = nullptr;
  size_t lastBefore = 0;
  size_t firstAfter = 0;
};

/// Snapshot indices of the nodes touching `v`, ascending, unique.
std::vector<size_t> touchTimes(const ir::Value &v, const Positions &pos) {
  std::vector<size_t> times;
  if (v.def)
    times.push_back(pos.of(v.def) / 4);
  for (const ir::Use &u : v.uses())
    times.push_back(pos.of(u.user) / 4);
  llvm::sort(times);
  times.erase(std::unique(times.begin(), times.end()), times.end());
  return times;
}

/// GPU activations live across `time` without being used there, biggest
/// first (ties: the longest gap, then the first created).
std::vector<SpillCandidate> candidatesAt(const ir::Graph &g, const Positions &pos,
                                         const TierLayout &layout, int64_t time) {
  std::vector<SpillCandidate> found;
  for (const auto &v : g.values()) {
    if (v->tier != ir::Tier::Gpu || isPersistent(g, *v))
      continue;
    const BufferInterval &iv = layout.intervals.lookup(v.get());
    if (iv.begin >= time || iv.end <= time)
      continue;
    std::vector<size_t> u = touchTimes(*v, pos);
    auto after = llvm::upper_bound(u, static_cast<size_t>(time));
    if (after == u.begin() || after == u.end() || *(after - 1) == static_cast<size_t>(time))
      continue;
    SpillCandidate c{v.get(), *(after - 1), *after};
    // Refetching right after the peak must leave something to gain.
    if (c.firstAfter <= static_cast<size_t>(time) + 1)
      continue;
    found.push_back(c);
  }
  auto gap = [](const SpillCandidate &s) { return s.firstAfter - s.lastBefore; };
  std::stable_sort(found.begin(), found.end(),
                   [&](const SpillCandidate &a, const SpillCandidate &b) {
                     uint64_t sa = a.value->byteSize(), sb = b.value->byteSize();
                     return sa != sb ? sa > sb : gap(a) > gap(b);
                   });
  return found;
}

/// The uses of `v` at or after snapshot index `from`.
std::vector<ir::Node *> usersFrom(const ir::Value &v, const Positions &pos, size_t from) {
  std::vector<ir::Node *> users;
  for (const ir::Use &u : v.uses())
    if (pos.of(u.user) >= 4 * static_cast<int64_t>(from) - 1 &&
        !llvm::is_contained(users, u.user))
      users.push_back(u.user);
  return users;
}

/// Evicts `c.value` after its last use before the peak and brings it back
/// just after the peak; uses from then on read the returned copy.
void spill(ir::Graph &g, Positions &pos, const SpillCandidate &c, int64_t time) {
  ir::Value *v = c.value;
  std::vector<ir::Node *> laterUsers = usersFrom(*v, pos, c.firstAfter);
  ir::Node *afterLastUse = pos.at(c.lastBefore + 1);
  // Back just ahead of the next use (a couple of nodes, to overlap), but
  // never before the peak it is relieving.
  size_t refetchAt = std::max<size_t>(time + 1, c.firstAfter > 2 ? c.firstAfter - 2 : 0);
  ir::Node *afterPeak = pos.at(refetchAt);

  std::string base = g.uniqueValueName(v->name + "@spill");
  ir::Value *onHost = g.addValue(base, v->dtype, v->shape, ir::ValueRole::Activation);
  onHost->tier = ir::Tier::Cpu;
  ir::Node *out = g.insertNode(afterLastUse, "Copy", g.uniqueNodeName(base), {v},
                               {onHost}, {}, kZincDomain);
  out->stream = ir::Stream::D2H;
  pos.inserted(out, afterLastUse);
  std::string back = g.uniqueValueName(v->name + "@refetch");
  ir::Value *again = g.addValue(back, v->dtype, v->shape, ir::ValueRole::Activation);
  again->tier = ir::Tier::Gpu;
  ir::Node *in = g.insertNode(afterPeak, "Copy", g.uniqueNodeName(back), {onHost},
                              {again}, {}, kZincDomain);
  in->stream = ir::Stream::H2D;
  pos.inserted(in, afterPeak);
  for (ir::Node *user : laterUsers)
    user->replaceUsesOfWith(v, again);
}

/// Ops whose cost is a pass over their output: recomputing one in backward
/// is cheaper than moving its result out and back. Products and
/// convolutions are not.
bool cheapToRecompute(const ir::Node &n) {
  static const char *const expensive[] = {
      "MatMul", "Gemm", "Conv", "ConvTranspose", "SoftmaxCrossEntropyLoss",
      "NegativeLogLikelihoodLoss", "Constant", "ConstantOfShape", "Range", "Shape"};
  return n.domain.empty() && n.stream == ir::Stream::Compute &&
         !llvm::is_contained(expensive, llvm::StringRef(n.opType)) &&
         llvm::count_if(n.outputs, [](const ir::Value *o) { return o; }) == 1;
}

/// Rematerialisation: when `c.value`'s node is cheap and every one of its
/// inputs is on the GPU and live at the next use anyway, a copy of the node
/// right before that use replaces keeping the value across the gap. Returns
/// false (and changes nothing) when that does not hold.
bool recompute(ir::Graph &g, Positions &pos, const SpillCandidate &c) {
  ir::Value *v = c.value;
  ir::Node *def = v->def;
  if (!def || !cheapToRecompute(*def))
    return false;
  for (ir::Value *in : def->inputs) {
    if (!in)
      continue;
    if (in->tier != ir::Tier::Gpu)
      return false;
    if (isPersistent(g, *in))
      continue;
    if (usersFrom(*in, pos, c.firstAfter).empty())
      return false;
  }
  std::vector<ir::Node *> laterUsers = usersFrom(*v, pos, c.firstAfter);
  std::string name = g.uniqueValueName(v->name + "@recompute");
  ir::Value *again = g.addValue(name, v->dtype, v->shape, ir::ValueRole::Activation);
  llvm::SmallVector<ir::Value *, 4> outputs;
  for (ir::Value *out : def->outputs)
    outputs.push_back(out == v ? again : nullptr);
  ir::Node *before = pos.at(c.firstAfter);
  ir::Node *copy = g.insertNode(before, def->opType, g.uniqueNodeName(name),
                                def->inputs, outputs, def->attrs, def->domain);
  pos.inserted(copy, before);
  for (ir::Node *user : laterUsers)
    user->replaceUsesOfWith(v, again);
  return true;
}

/// Rounds of layout; each relieves the whole overflow at the peak instant.
constexpr unsigned kMaxRounds = 32;
/// Rounds in a row without a lower peak (fragmentation, or a peak made of
/// operands in use) before giving up.
constexpr unsigned kMaxRoundsWithoutProgress = 4;

llvm::Expected<bool> Spill::run(ir::Graph &g, PassContext &ctx) {
  uint64_t capacity = ctx.memory.gpuCapacity;
  constexpr unsigned gpu = static_cast<unsigned>(ir::Tier::Gpu);
  if (!capacity || ctx.memory.transfersPlaced) // place kept a spilled copy.
    return false;
  bool changed = false;
  TierLayout layout = computeTierLayout(g, {ir::Tier::Gpu});
  uint64_t best = layout.peak[gpu], bestLive = layout.liveBound[gpu];
  unsigned sinceBetter = 0;
  for (unsigned round = 0; round < kMaxRounds && layout.peak[gpu] > capacity &&
                           sinceBetter < kMaxRoundsWithoutProgress;
       ++round) {
    int64_t time = layout.peakTime[gpu];
    Positions pos(g);
    std::vector<SpillCandidate> candidates = candidatesAt(g, pos, layout, time);
    if (candidates.empty())
      break;
    // Relieve the live bytes over capacity at the peak instant (one value at
    // least, when only fragmentation overflows). Values whose choice could
    // change another's (a recomputed node's inputs, what a spill already
    // moved) wait for the next round.
    uint64_t live = layout.liveBound[gpu];
    uint64_t excess = live > capacity ? live - capacity : 1, relieved = 0;
    llvm::DenseSet<const ir::Value *> touched;
    for (const SpillCandidate &c : candidates) {
      if (relieved >= excess)
        break;
      const ir::Node *def = c.value->def;
      if (touched.count(c.value) ||
          (def && llvm::any_of(def->inputs, [&](const ir::Value *in) { return touched.count(in); })))
        continue;
      touched.insert(c.value);
      if (def)
        touched.insert(def->inputs.begin(), def->inputs.end());
      if (!recompute(g, pos, c))
        spill(g, pos, c, time);
      relieved += c.value->byteSize();
      changed = true;
    }
    layout = computeTierLayout(g, {ir::Tier::Gpu});
    // Progress is the packed peak or, through fragmentation, the live bytes
    // under it.
    if (layout.peak[gpu] < best || layout.liveBound[gpu] < bestLive) {
      best = std::min(best, layout.peak[gpu]);
      bestLive = std::min(bestLive, layout.liveBound[gpu]);
      sinceBetter = 0;
    } else {
      ++sinceBetter;
    }
  }
  return changed;
}

} // namespace

std::unique_ptr<Pass> createSpillPass() { return std::make_unique<Spill>(); }

} // namespace zinc::passes
