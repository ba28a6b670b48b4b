//===- TierLayout.cpp - Live intervals and static offsets per memory tier -===//
#include "zinc/passes/TierLayout.h"
#include "zinc/ops/KernelWorkspace.h"
#include "zinc/ops/OpDefinition.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MathExtras.h"
#include <cassert>
#include <future>
#include <limits>
#include <numeric>

namespace zinc {

uint64_t tierAlignment(ir::Tier t) { return t == ir::Tier::Gpu ? 64 : 4096; }

bool isPersistent(const ir::Graph &g, const ir::Value &v) {
  return v.role != ir::ValueRole::Activation || g.isOutput(&v);
}

ir::Tier workspaceTier(ir::Stream s) {
  return s == ir::Stream::Host ? ir::Tier::Cpu : ir::Tier::Gpu;
}

void kernelWorkspaces(const ir::Graph &g, uint64_t (&bytes)[kNumStreams]) {
  std::fill(std::begin(bytes), std::end(bytes), 0);
  llvm::SmallVector<KernelOperand, 8> ins, outs;
  auto describe = [](const ir::Value *v) {
    return v ? KernelOperand{v->dtype, v->shape, true} : KernelOperand{};
  };
  for (const ir::Node *n : g.nodes()) {
    // The copy links run only zinc.Copy and zinc.CopyInto (the plan
    // verifier proves it), which take none: on an offloaded plan most nodes.
    if (n->stream == ir::Stream::H2D || n->stream == ir::Stream::D2H ||
        n->stream == ir::Stream::Nvme)
      continue;
    // Most ops take no scratch: no operands to describe.
    const ops::OpDefinition *def = ops::lookupOp(n->domain, n->opType);
    if (!def || !def->workspace)
      continue;
    ins.clear();
    outs.clear();
    for (const ir::Value *v : n->inputs)
      ins.push_back(describe(v));
    for (const ir::Value *v : n->outputs)
      outs.push_back(describe(v));
    uint64_t need = kernelWorkspaceBytes(n->domain, n->opType, g.opsetVersion,
                                         ins, outs, n->attrs);
    uint64_t &stream = bytes[static_cast<unsigned>(n->stream)];
    stream = std::max(stream, need);
  }
}

/// Whether node `n` reads its input `i` (a zinc.CopyInto writes its second).
static bool readsInput(const ir::Node &n, unsigned i) {
  return !(i == 1 && n.domain == "zinc" && n.opType == "CopyInto");
}

/// The NVMe tier holds step-long values only (model states), so no packing
/// can share bytes between them, and their order is free. Laid out in the
/// order of their last read in the step, the tensors the optimizer phase
/// reads together (a parameter and its moments, one after the other) lie
/// together, and the runtime moves them as one request (NvmeLane.cpp).
/// None when some value of the tier is not step-long.
static llvm::Optional<ArenaLayout>
layoutInReadOrder(llvm::ArrayRef<const ir::Value *> members,
                  llvm::ArrayRef<BufferInterval> intervals, int64_t last,
                  const llvm::DenseMap<const ir::Value *, int64_t> &lastRead,
                  uint64_t alignment) {
  for (const BufferInterval &iv : intervals)
    if (iv.begin != 0 || iv.end != last)
      return llvm::None;
  std::vector<size_t> order(intervals.size());
  std::iota(order.begin(), order.end(), 0);
  auto key = [&](size_t i) -> int64_t {
    if (i >= members.size())
      return -1; // a workspace (none lives in this tier today)
    auto it = lastRead.find(members[i]);
    return it == lastRead.end() ? -1 : it->second;
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return key(a) < key(b); });
  ArenaLayout layout;
  layout.offsets.assign(intervals.size(), 0);
  for (size_t i : order) {
    layout.offsets[i] = layout.peak;
    layout.peak +=
        llvm::alignTo(std::max<uint64_t>(intervals[i].size, 1), alignment);
  }
  layout.liveLowerBound = layout.peak;
  return layout;
}

/// computeTierLayout, leaving unpacked a tier whose live bytes alone exceed
/// `packWithin`.
static TierLayout layoutTiers(const ir::Graph &g, llvm::ArrayRef<ir::Tier> tiers,
                              const uint64_t (&workspaces)[kNumStreams],
                              uint64_t packWithin) {
  TierLayout layout;
  std::copy(std::begin(workspaces), std::end(workspaces), layout.workspaceBytes);
  std::vector<const ir::Node *> order;
  for (const auto &n : g.nodes())
    order.push_back(&*n);
  int64_t last = std::max<int64_t>(0, static_cast<int64_t>(order.size()) - 1);
  // Intervals by value id while the nodes are walked (a dense table, not
  // a hash lookup per operand), then by value.
  std::vector<BufferInterval> byId(g.valueIdBound());
  for (const auto &v : g.values()) {
    // Step-long values span everything; graph outputs live from their
    // definition to the end of the step, where the runtime reads them.
    bool wholeStep = v->role != ir::ValueRole::Activation;
    bool output = g.isOutput(v.get());
    byId[v->id] = {v->byteSize(), wholeStep ? 0 : last + 1,
                   wholeStep || output ? last : -1};
  }
  for (int64_t pos = 0; pos < static_cast<int64_t>(order.size()); ++pos)
    for (const ir::Value *v : llvm::concat<ir::Value *const>(
             order[pos]->inputs, order[pos]->outputs))
      if (v) {
        BufferInterval &iv = byId[v->id];
        iv.begin = std::min(iv.begin, pos);
        iv.end = std::max(iv.end, pos);
      }
  for (const auto &v : g.values()) {
    BufferInterval &iv = byId[v->id];
    if (iv.begin > iv.end) // Never touched.
      iv.begin = iv.end = 0;
  }
  layout.intervals = ir::ValueTable<BufferInterval>(std::move(byId));
  layout.offsets = ir::ValueTable<uint64_t>(g.valueIdBound());
  llvm::DenseMap<const ir::Value *, int64_t> lastNvmeRead;
  if (llvm::is_contained(tiers, ir::Tier::Nvme))
    for (int64_t pos = 0; pos < static_cast<int64_t>(order.size()); ++pos)
      for (unsigned i = 0; i < order[pos]->inputs.size(); ++i) {
        const ir::Value *v = order[pos]->inputs[i];
        if (v && v->tier == ir::Tier::Nvme && readsInput(*order[pos], i))
          lastNvmeRead[v] = pos;
      }

  struct TierPacking {
    ir::Tier tier;
    std::vector<const ir::Value *> members;
    std::vector<BufferInterval> intervals;
    std::vector<unsigned> workspaces;
    /// The most bytes live at one instant, and the first instant with them.
    uint64_t liveBound = 0;
    int64_t peakTime = 0;
    ArenaLayout arena;
  };
  std::vector<TierPacking> packings;
  size_t buffers = 0;
  for (ir::Tier tier : tiers) {
    TierPacking &p = packings.emplace_back();
    p.tier = tier;
    for (const auto &v : g.values())
      if (v->tier == tier) {
        p.members.push_back(v.get());
        p.intervals.push_back(layout.intervals.at(v.get()));
      }
    // The tier's workspaces follow its values, live the whole step.
    for (unsigned s = 0; s < kNumStreams; ++s)
      if (layout.workspaceBytes[s] &&
          workspaceTier(static_cast<ir::Stream>(s)) == tier) {
        p.workspaces.push_back(s);
        p.intervals.push_back({layout.workspaceBytes[s], 0, last});
      }
    // The instant of highest live bytes, where relieving pressure helps:
    // a prefix sum over the node positions (intervals lie in [0, last + 1]).
    std::vector<int64_t> delta(last + 3, 0);
    for (const BufferInterval &iv : p.intervals) {
      int64_t size = llvm::alignTo(std::max<uint64_t>(iv.size, 1), tierAlignment(tier));
      delta[iv.begin] += size;
      delta[iv.end + 1] -= size;
    }
    int64_t live = 0, most = -1;
    for (int64_t time = 0; time < static_cast<int64_t>(delta.size()); ++time) {
      if (!delta[time])
        continue;
      live += delta[time];
      if (live > most) {
        most = live;
        p.peakTime = time;
      }
    }
    p.liveBound = static_cast<uint64_t>(std::max<int64_t>(most, 0));
    if (p.liveBound > packWithin) {
      // No packing fits it: not worth making.
      unsigned t = static_cast<unsigned>(tier);
      layout.liveBound[t] = p.liveBound;
      layout.peakTime[t] = p.peakTime;
      packings.pop_back();
      continue;
    }
    buffers += p.intervals.size();
  }
  // The tiers pack independently: on big graphs, the first on a second
  // thread (a thread costs more than packing a few thousand buffers).
  constexpr size_t kBuffersWorthAThread = 8192;
  std::future<void> first;
  for (size_t i = 0; i < packings.size(); ++i) {
    auto pack = [&p = packings[i], &lastNvmeRead, last] {
      if (p.tier == ir::Tier::Nvme)
        if (auto inOrder =
                layoutInReadOrder(p.members, p.intervals, last, lastNvmeRead,
                                  tierAlignment(p.tier))) {
          p.arena = std::move(*inOrder);
          return;
        }
      p.arena = layoutArena(p.intervals, tierAlignment(p.tier));
    };
    if (i == 0 && packings.size() > 1 && buffers >= kBuffersWorthAThread)
      first = std::async(std::launch::async, pack);
    else
      pack();
  }
  if (first.valid())
    first.get();

  for (TierPacking &p : packings) {
    ir::Tier tier = p.tier;
    const ArenaLayout &arena = p.arena;
    for (size_t i = 0; i < p.members.size(); ++i)
      layout.offsets[p.members[i]] = arena.offsets[i];
    for (size_t i = 0; i < p.workspaces.size(); ++i)
      layout.workspaceOffset[p.workspaces[i]] = arena.offsets[p.members.size() + i];
    unsigned t = static_cast<unsigned>(tier);
    layout.packed[t] = true;
    layout.members[t] = p.members;
    layout.peak[t] = arena.peak;
    layout.liveBound[t] = arena.liveLowerBound;
    layout.peakTime[t] = p.peakTime;
  }
  return layout;
}

TierLayout computeTierLayout(const ir::Graph &g, llvm::ArrayRef<ir::Tier> tiers) {
  uint64_t workspaces[kNumStreams];
  kernelWorkspaces(g, workspaces);
  return layoutTiers(g, tiers, workspaces, std::numeric_limits<uint64_t>::max());
}

TierLayout layoutTierWithin(const ir::Graph &g, ir::Tier tier,
                            const uint64_t (&workspaces)[kNumStreams], uint64_t capacity) {
  return layoutTiers(g, {tier}, workspaces, capacity);
}

/// Copies tier `t`'s packing from `from` into `into`.
static void copyPacking(TierLayout &into, const TierLayout &from, const ir::Graph &g,
                        unsigned t) {
  into.packed[t] = true;
  into.members[t] = from.members[t];
  into.peak[t] = from.peak[t];
  into.liveBound[t] = from.liveBound[t];
  into.peakTime[t] = from.peakTime[t];
  for (unsigned s = 0; s < kNumStreams; ++s)
    if (static_cast<unsigned>(workspaceTier(static_cast<ir::Stream>(s))) == t)
      into.workspaceOffset[s] = from.workspaceOffset[s];
  for (const auto &v : g.values())
    if (static_cast<unsigned>(v->tier) == t)
      into.offsets[v.get()] = from.offsets.lookup(v.get());
}

void takePackedTiers(TierLayout &into, const TierLayout &from, const ir::Graph &g) {
  assert(into.intervals.idBound() == from.intervals.idBound() &&
         "layouts of different graphs");
  for (unsigned t = 0; t < 3; ++t)
    if (from.packed[t])
      copyPacking(into, from, g, t);
}

/// Whether `partial`'s packing of tier `t` is what packing it now would
/// give: packing reads only the tier's members in value order, their
/// intervals and the tier's workspaces, so those must be unchanged.
static bool packingHolds(const ir::Graph &g, const TierLayout &partial,
                         const TierLayout &now, unsigned t) {
  const std::vector<const ir::Value *> &was = partial.members[t];
  size_t i = 0;
  for (const auto &v : g.values()) {
    if (static_cast<unsigned>(v->tier) != t)
      continue;
    if (i == was.size() || was[i++] != v.get())
      return false;
    const BufferInterval &before = partial.intervals.at(v.get());
    const BufferInterval &after = now.intervals.at(v.get());
    if (before.size != after.size || before.begin != after.begin || before.end != after.end)
      return false;
  }
  if (i != was.size())
    return false;
  for (unsigned s = 0; s < kNumStreams; ++s)
    if (static_cast<unsigned>(workspaceTier(static_cast<ir::Stream>(s))) == t &&
        partial.workspaceBytes[s] != now.workspaceBytes[s])
      return false;
  return true;
}

TierLayout completeTierLayout(const ir::Graph &g, const TierLayout &partial) {
  llvm::SmallVector<ir::Tier, 3> unpacked;
  for (ir::Tier t : {ir::Tier::Gpu, ir::Tier::Cpu, ir::Tier::Nvme})
    if (!partial.packed[static_cast<unsigned>(t)])
      unpacked.push_back(t);
  TierLayout layout = computeTierLayout(g, unpacked);
  for (unsigned t = 0; t < 3; ++t) {
    if (!partial.packed[t])
      continue;
    if (packingHolds(g, partial, layout, t))
      copyPacking(layout, partial, g, t);
    else
      copyPacking(layout, computeTierLayout(g, {static_cast<ir::Tier>(t)}), g, t);
  }
  return layout;
}

} // namespace zinc
