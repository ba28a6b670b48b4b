//===- Spill.cpp - spill: what stops being kept when the GPU tier overflows ===//
//
// Runs after insert-transfers, ahead of allocate. When the GPU tier's packed
// peak exceeds its capacity, activations that sit idle while the tier is
// over budget stop being kept: recomputed just before their next use when
// their node is cheap and its inputs are at hand anyway (rematerialisation),
// else spilled: evicted to the CPU after their last use and fetched back
// ahead of the next (the activation offloading of ZeRO-Offload).
//
// A round is one sweep in program order over the GPU's live bytes (from
// TierLayout's intervals). Every idle stretch of every activation enters a
// queue when it begins; at each instant over the target, the biggest idle
// values whose next use is furthest away are let go until the instant fits
// (Belady's choice among the biggest: what leaves longest relieves the most
// instants at once). So one round handles every overflowing instant, in
// O(n log n). Then the tier is packed again; if fragmentation still
// overflows it, the next round aims that much lower. allocate then proves
// the result fits, or says what would. The first round packs the tier only
// when its live bytes fit the capacity: when they alone overflow it, no
// packing fits, and the sweep needs only the intervals.
//
//===----------------------------------------------------------------------===//
#include "zinc/ops/OpDefinition.h"
#include "zinc/passes/NodeFlops.h"
#include "zinc/passes/Pass.h"
#include "zinc/passes/Spill.h"
#include "zinc/passes/TierLayout.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/MathExtras.h"
#include <queue>

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
    pos.reserve(g.numNodes());
    order.reserve(g.numNodes());
    for (ir::Node *n : g.nodes()) {
      pos[n] = 4 * static_cast<int64_t>(order.size());
      order.push_back(n);
    }
  }
  int64_t of(const ir::Node *n) const { return pos.lookup(n); }
  /// The snapshot node at index i (in TierLayout's time), or null past the end.
  ir::Node *at(size_t i) const { return i < order.size() ? order[i] : nullptr; }
  size_t size() const { return order.size(); }
  void inserted(const ir::Node *n, const ir::Node *before) {
    pos[n] = before ? pos.lookup(before) - 1 : 4 * static_cast<int64_t>(order.size());
  }

private:
  std::vector<ir::Node *> order;
  llvm::DenseMap<const ir::Node *, int64_t> pos;
};

/// Which tier a round relieves, and how: GPU activations go to the CPU
/// (or are recomputed); CPU activations (gradients waiting for the host
/// update, activations the GPU spilled) go to NVMe.
struct SpillTarget {
  ir::Tier tier = ir::Tier::Gpu;
  ir::Tier lower = ir::Tier::Cpu;
  ir::Stream out = ir::Stream::D2H;
  ir::Stream in = ir::Stream::H2D;
  bool mayRecompute = true;
};
constexpr SpillTarget kGpuSpill{};
constexpr SpillTarget kCpuSpill{ir::Tier::Cpu, ir::Tier::Nvme, ir::Stream::Nvme,
                                ir::Stream::Nvme, false};

/// A stretch of snapshot indices over which a GPU activation is untouched:
/// between its use at `lastUse` and its next at `nextUse`. Let go at an
/// instant of the stretch, it is gone from lastUse + 1 (its eviction runs
/// right after that use) until its return, a couple of nodes ahead of the
/// next use to overlap, but never before the instant it relieves.
struct IdleGap {
  ir::Value *value = nullptr;
  size_t lastUse = 0;
  size_t nextUse = 0;
  size_t firstRelieved() const { return lastUse + 1; }
  /// The last instant it can relieve: its return then runs just after.
  size_t lastRelievable() const { return nextUse - 2; }
  /// Where it comes back when let go at `time`.
  size_t returnAt(size_t time) const { return std::max(time + 1, nextUse - 2); }
};
constexpr size_t kMinGap = 3;

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

/// Every idle stretch of the tier's activations long enough to relieve an
/// instant, in the order they begin.
std::vector<IdleGap> idleGaps(const ir::Graph &g, const Positions &pos,
                              const SpillTarget &target) {
  std::vector<IdleGap> gaps;
  for (const auto &v : g.values()) {
    if (v->tier != target.tier || isPersistent(g, *v))
      continue;
    std::vector<size_t> t = touchTimes(*v, pos);
    for (size_t i = 0; i + 1 < t.size(); ++i)
      if (t[i + 1] - t[i] >= kMinGap)
        gaps.push_back({v.get(), t[i], t[i + 1]});
  }
  llvm::sort(gaps, [](const IdleGap &a, const IdleGap &b) {
    return a.lastUse != b.lastUse ? a.lastUse < b.lastUse : a.nextUse > b.nextUse;
  });
  return gaps;
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

/// A zinc.Copy of `from` into a new value named after `base` in `tier`,
/// on `stream`, inserted before `before`.
ir::Value *copyBefore(ir::Graph &g, Positions &pos, ir::Node *before, ir::Value *from,
                      const std::string &base, ir::Tier tier, ir::Stream stream) {
  std::string name = g.uniqueValueName(base);
  ir::Value *to = g.addValue(name, from->dtype, from->shape, ir::ValueRole::Activation);
  to->tier = tier;
  ir::Node *copy = g.insertNode(before, "Copy", g.uniqueNodeName(name), {from}, {to}, {},
                                kZincDomain);
  copy->stream = stream;
  pos.inserted(copy, before);
  return to;
}

/// Evicts `gap.value` after its last use before the gap and brings it back
/// ahead of the next (relieving `time`); uses from then on read the
/// returned copy.
void spill(ir::Graph &g, Positions &pos, const IdleGap &gap, size_t time,
           const SpillTarget &target) {
  ir::Value *v = gap.value;
  std::vector<ir::Node *> laterUsers = usersFrom(*v, pos, gap.nextUse);
  ir::Value *below = copyBefore(g, pos, pos.at(gap.lastUse + 1), v, v->name + "@spill",
                                target.lower, target.out);
  ir::Value *again = copyBefore(g, pos, pos.at(gap.returnAt(time)), below,
                                v->name + "@refetch", target.tier, target.in);
  for (ir::Node *user : laterUsers)
    user->replaceUsesOfWith(v, again);
}

/// ONNX ops whose cost is a pass over their output (Ops.def's FLOPs column
/// says OutputElements): recomputing one in backward is cheaper than moving
/// its result out and back. Products, convolutions and losses are not;
/// nor are the shape-only ops, which no GPU kernel runs (Backends Cpu), nor
/// an op Ops.def does not know (only hand-written graphs have one).
bool cheapToRecompute(const ir::Node &n) {
  if (!n.domain.empty() || n.stream != ir::Stream::Compute)
    return false;
  const ops::OpDefinition *def = ops::lookupOp(n.domain, n.opType);
  return def && def->hasKernelOn(ops::Cuda) && flopsPerOutputElement(n) &&
         llvm::count_if(n.outputs, [](const ir::Value *o) { return o; }) == 1;
}

/// Rematerialisation: when `gap.value`'s node is cheap and every one of its
/// inputs is on the GPU and live at the next use anyway, a copy of the node
/// right before that use replaces keeping the value across the gap. Returns
/// false (and changes nothing) when that does not hold.
bool recompute(ir::Graph &g, Positions &pos, const IdleGap &gap) {
  ir::Value *v = gap.value;
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
    if (usersFrom(*in, pos, gap.nextUse).empty())
      return false;
  }
  std::vector<ir::Node *> laterUsers = usersFrom(*v, pos, gap.nextUse);
  std::string name = g.uniqueValueName(v->name + "@recompute");
  ir::Value *again = g.addValue(name, v->dtype, v->shape, ir::ValueRole::Activation);
  llvm::SmallVector<ir::Value *, 4> outputs;
  for (ir::Value *out : def->outputs)
    outputs.push_back(out == v ? again : nullptr);
  ir::Node *before = pos.at(gap.nextUse);
  ir::Node *copy = g.insertNode(before, def->opType, g.uniqueNodeName(name),
                                def->inputs, outputs, def->attrs, def->domain);
  pos.inserted(copy, before);
  for (ir::Node *user : laterUsers)
    user->replaceUsesOfWith(v, again);
  return true;
}

/// Idle stretches by size class (log2 of the bytes), each a heap on how far
/// away the next use is: the biggest values go first, and among them the
/// one needed last.
class IdleQueue {
public:
  void push(const IdleGap &gap) {
    unsigned size = llvm::Log2_64(std::max<uint64_t>(gap.value->byteSize(), 1));
    classes[size].push(gap);
  }

  /// The stretch to let go at `time`, or none: one that covers `time`, of a
  /// value not yet let go or pinned this round.
  llvm::Optional<IdleGap> pop(size_t time, const llvm::DenseSet<const ir::Value *> &taken) {
    for (unsigned c = kClasses; c-- > 0;) {
      auto &heap = classes[c];
      while (!heap.empty()) {
        IdleGap top = heap.top();
        if (top.lastRelievable() < time) {
          // The furthest next use has passed: so has every other here.
          heap = {};
          break;
        }
        heap.pop();
        if (!taken.count(top.value))
          return top;
      }
    }
    return llvm::None;
  }

private:
  struct NextUseFirst {
    bool operator()(const IdleGap &a, const IdleGap &b) const {
      return a.nextUse < b.nextUse;
    }
  };
  static constexpr unsigned kClasses = 64;
  std::priority_queue<IdleGap, std::vector<IdleGap>, NextUseFirst> classes[kClasses];
};

/// One sweep: lets go of idle values wherever the tier's live bytes exceed
/// `goal`. Returns whether it changed the graph.
bool relieve(ir::Graph &g, const TierLayout &layout, uint64_t goal,
             const SpillTarget &target) {
  Positions pos(g);
  // Live bytes by snapshot index, as a difference array that the sweep
  // also uses to bring values back.
  std::vector<int64_t> delta(pos.size() + 2, 0);
  uint64_t align = tierAlignment(target.tier);
  for (const auto &v : g.values()) {
    if (v->tier != target.tier)
      continue;
    const BufferInterval &iv = layout.intervals.lookup(v.get());
    int64_t bytes = llvm::alignTo(std::max<uint64_t>(iv.size, 1), align);
    delta[iv.begin] += bytes;
    delta[iv.end + 1] -= bytes;
  }
  for (unsigned s = 0; s < kNumStreams; ++s)
    if (workspaceTier(static_cast<ir::Stream>(s)) == target.tier)
      delta[0] += llvm::alignTo(layout.workspaceBytes[s], align);

  std::vector<IdleGap> gaps = idleGaps(g, pos, target);
  IdleQueue idle;
  // Values let go this round, and the inputs of recomputed ones: their
  // uses have moved, so their stretches of this snapshot no longer hold.
  llvm::DenseSet<const ir::Value *> taken;
  bool changed = false;
  size_t next = 0;
  int64_t live = 0;
  for (size_t time = 0; time < pos.size(); ++time) {
    live += delta[time];
    for (; next < gaps.size() && gaps[next].firstRelieved() <= time; ++next)
      idle.push(gaps[next]);
    while (live > static_cast<int64_t>(goal)) {
      llvm::Optional<IdleGap> gap = idle.pop(time, taken);
      if (!gap)
        break;
      ir::Value *v = gap->value;
      ir::Node *def = v->def;
      taken.insert(v);
      if (target.mayRecompute && recompute(g, pos, *gap)) {
        taken.insert(def->inputs.begin(), def->inputs.end());
      } else {
        spill(g, pos, *gap, time, target);
      }
      int64_t bytes = llvm::alignTo(std::max<uint64_t>(v->byteSize(), 1), align);
      live -= bytes;
      delta[gap->returnAt(time)] += bytes;
      changed = true;
    }
  }
  return changed;
}

/// Whether the tier's buffers fit even with none sharing bytes: no packing
/// places a buffer above the sum of those placed before it.
bool fitsSideBySide(const ir::Graph &g, uint64_t capacity, ir::Tier tier,
                    const uint64_t (&workspaces)[kNumStreams]) {
  uint64_t align = tierAlignment(tier), total = 0;
  for (unsigned s = 0; s < kNumStreams; ++s)
    if (workspaceTier(static_cast<ir::Stream>(s)) == tier)
      total += llvm::alignTo(workspaces[s], align);
  for (const auto &v : g.values())
    if (v->tier == tier)
      total += llvm::alignTo(std::max<uint64_t>(v->byteSize(), 1), align);
  return total <= capacity;
}

/// Rounds of sweep and packing: the first aims at the capacity, later ones
/// lower by what fragmentation added.
constexpr unsigned kMaxRounds = 8;

/// What relieving a tier did: whether it changed the graph, and the
/// tier's packing of the graph as it was left, when one was made after the
/// last change (allocate need not pack that tier again).
struct Relieved {
  bool changed = false;
  llvm::Optional<TierLayout> layout;
};

/// Rounds of sweeps over one tier until it fits `capacity` or a round
/// changes nothing. `workspaces`: each stream's (kernelWorkspaces), which
/// no round changes: its copies run on the copy links, which take none,
/// and a recomputation is a copy of a kernel with the same operands.
Relieved relieveTier(ir::Graph &g, uint64_t capacity, const SpillTarget &target,
                     const uint64_t (&workspaces)[kNumStreams]) {
  Relieved result;
  if (!capacity || fitsSideBySide(g, capacity, target.tier, workspaces))
    return result;
  unsigned tier = static_cast<unsigned>(target.tier);
  uint64_t goal = capacity;
  for (unsigned round = 0; round < kMaxRounds; ++round) {
    result.layout = layoutTierWithin(g, target.tier, workspaces,
                                     round == 0 ? capacity : UINT64_MAX);
    if (!result.layout->packed[tier]) {
      // The live bytes alone overflow: the first sweep aims at the
      // capacity by the intervals; packing waits for what it leaves.
      bool relieved = relieve(g, *result.layout, goal, target);
      result.layout.reset();
      if (!relieved)
        break; // allocate packs the tier and says what it needs.
      result.changed = true;
      continue;
    }
    uint64_t peak = result.layout->peak[tier];
    if (peak <= capacity)
      break;
    if (round > 0) {
      uint64_t over = peak - capacity;
      if (over >= goal)
        break;
      goal -= over;
    }
    if (!relieve(g, *result.layout, goal, target))
      break;
    result.changed = true;
    result.layout.reset();
  }
  return result;
}

llvm::Expected<bool> Spill::run(ir::Graph &g, PassContext &ctx) {
  const MemoryOptions &mem = ctx.memory;
  uint64_t workspaces[kNumStreams];
  kernelWorkspaces(g, workspaces);
  Relieved gpu = relieveTier(g, mem.gpuCapacity, kGpuSpill, workspaces);
  Relieved cpu;
  // What the CPU tier cannot hold (gradients waiting for the host update,
  // activations the GPU let go) waits on NVMe, when the plan has an NVMe
  // tier to put it in.
  if (mem.nvmeCapacity &&
      (mem.optimizerTier == ir::Tier::Nvme || mem.paramsTier == ir::Tier::Nvme)) {
    cpu = relieveTier(g, mem.cpuCapacity, kCpuSpill, workspaces);
    if (cpu.changed)
      gpu.layout.reset(); // Packed before these copies.
  }
  // The packings still true of the graph go to allocate, which packs only
  // the other tiers (CPU relief packs the CPU tier, GPU relief the GPU's).
  ctx.layout.reset();
  if (gpu.layout && cpu.layout)
    takePackedTiers(*gpu.layout, *cpu.layout, g);
  if (gpu.layout || cpu.layout)
    ctx.layout = std::make_shared<const TierLayout>(gpu.layout ? std::move(*gpu.layout)
                                                               : std::move(*cpu.layout));
  return gpu.changed || cpu.changed;
}

} // namespace

bool gpuFitsUnspilled(const ir::Graph &g, uint64_t capacity) {
  uint64_t workspaces[kNumStreams];
  kernelWorkspaces(g, workspaces);
  if (!capacity || fitsSideBySide(g, capacity, ir::Tier::Gpu, workspaces))
    return true;
  constexpr unsigned gpu = static_cast<unsigned>(ir::Tier::Gpu);
  return layoutTierWithin(g, ir::Tier::Gpu, workspaces).peak[gpu] <= capacity;
}

std::unique_ptr<Pass> createSpillPass() { return std::make_unique<Spill>(); }

} // namespace zinc::passes
