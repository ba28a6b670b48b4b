//===- Allocate.cpp - allocate: prove every tier fits, spilling if needed -===//
//
// Lays out each tier (TierLayout: best-fit static offsets over live
// intervals) and checks the peaks against the capacities. When the GPU tier
// overflows, activations that sit idle across the peak stop being kept:
// recomputed just before their next use when their node is cheap and its
// inputs are at hand anyway (activation checkpointing), else spilled:
// evicted to the CPU after their last use before the peak and fetched back
// ahead of the next (the activation offloading of ZeRO-Offload). This repeats until
// the GPU fits or nothing is left to spill; then the diagnostic names the
// smallest GPU capacity this plan reached, which is one that would fit.
//
//===----------------------------------------------------------------------===//
#include "zinc/passes/Pass.h"
#include "zinc/passes/TierLayout.h"
#include "zinc/support/Error.h"
#include "zinc/support/Size.h"

namespace zinc::passes {
namespace {

class Allocate : public Pass {
public:
  llvm::StringRef getName() const override { return "Allocate Tiers"; }
  llvm::StringRef getArgument() const override { return "allocate"; }
  llvm::Expected<bool> run(ir::Graph &g, PassContext &ctx) override;
};

/// A GPU activation idle across `time`: its last use before and first use
/// after, as node indices.
struct SpillCandidate {
  ir::Value *value = nullptr;
  size_t lastBefore = 0;
  size_t firstAfter = 0;
};

/// The biggest GPU activation live across `time` without being used there
/// (ties: the longest gap, then the first created).
llvm::Optional<SpillCandidate> pickSpill(const ir::Graph &g, int64_t time) {
  llvm::DenseMap<const ir::Value *, std::vector<size_t>> uses;
  auto nodes = g.nodes();
  for (size_t i = 0; i < nodes.size(); ++i)
    for (const ir::Value *v : llvm::concat<ir::Value *const>(nodes[i]->inputs,
                                                            nodes[i]->outputs))
      if (v && (uses[v].empty() || uses[v].back() != i))
        uses[v].push_back(i);
  llvm::Optional<SpillCandidate> best;
  for (const auto &v : g.values()) {
    if (v->tier != ir::Tier::Gpu || isPersistent(g, *v))
      continue;
    const std::vector<size_t> &u = uses[v.get()];
    auto after = llvm::upper_bound(u, static_cast<size_t>(time));
    if (after == u.begin() || after == u.end() || *(after - 1) == static_cast<size_t>(time))
      continue;
    SpillCandidate c{v.get(), *(after - 1), *after};
    // Refetching right after the peak must leave something to gain.
    if (c.firstAfter <= static_cast<size_t>(time) + 1)
      continue;
    auto gap = [](const SpillCandidate &s) { return s.firstAfter - s.lastBefore; };
    if (!best || v->byteSize() > best->value->byteSize() ||
        (v->byteSize() == best->value->byteSize() && gap(c) > gap(*best)))
      best = c;
  }
  return best;
}

/// Evicts `c.value` after its last use before the peak and brings it back
/// just after the peak; uses from then on read the returned copy.
void spill(ir::Graph &g, const SpillCandidate &c, int64_t time) {
  ir::Value *v = c.value;
  auto nodes = g.nodes();
  std::vector<ir::Node *> laterUsers;
  for (size_t i = c.firstAfter; i < nodes.size(); ++i)
    if (llvm::is_contained(nodes[i]->inputs, v))
      laterUsers.push_back(nodes[i].get());
  ir::Node *afterLastUse = nodes[c.lastBefore + 1].get();
  // Back just ahead of the next use (a couple of nodes, to overlap), but
  // never before the peak it is relieving.
  size_t refetchAt = std::max<size_t>(time + 1, c.firstAfter > 2 ? c.firstAfter - 2 : 0);
  ir::Node *afterPeak = nodes[refetchAt].get();

  std::string base = g.uniqueValueName(v->name + "@spill");
  ir::Value *onHost = g.addValue(base, v->dtype, v->shape, ir::ValueRole::Activation);
  onHost->tier = ir::Tier::Cpu;
  ir::Node *out = g.insertNode(afterLastUse, "Copy", g.uniqueNodeName(base), {v},
                               {onHost}, {}, "zinc");
  out->stream = ir::Stream::D2H;
  std::string back = g.uniqueValueName(v->name + "@refetch");
  ir::Value *again = g.addValue(back, v->dtype, v->shape, ir::ValueRole::Activation);
  again->tier = ir::Tier::Gpu;
  ir::Node *in = g.insertNode(afterPeak, "Copy", g.uniqueNodeName(back), {onHost},
                              {again}, {}, "zinc");
  in->stream = ir::Stream::H2D;
  for (ir::Node *user : laterUsers)
    for (ir::Value *&operand : user->inputs)
      if (operand == v)
        operand = again;
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
bool recompute(ir::Graph &g, const SpillCandidate &c) {
  ir::Value *v = c.value;
  ir::Node *def = v->def;
  if (!def || !cheapToRecompute(*def))
    return false;
  auto nodes = g.nodes();
  for (ir::Value *in : def->inputs) {
    if (!in)
      continue;
    if (in->tier != ir::Tier::Gpu)
      return false;
    if (isPersistent(g, *in))
      continue;
    bool usedLater = false;
    for (size_t i = c.firstAfter; i < nodes.size() && !usedLater; ++i)
      usedLater = llvm::is_contained(nodes[i]->inputs, in);
    if (!usedLater)
      return false;
  }
  std::vector<ir::Node *> laterUsers;
  for (size_t i = c.firstAfter; i < nodes.size(); ++i)
    if (llvm::is_contained(nodes[i]->inputs, v))
      laterUsers.push_back(nodes[i].get());
  std::string name = g.uniqueValueName(v->name + "@recompute");
  ir::Value *again = g.addValue(name, v->dtype, v->shape, ir::ValueRole::Activation);
  llvm::SmallVector<ir::Value *, 4> outputs;
  for (ir::Value *out : def->outputs)
    outputs.push_back(out == v ? again : nullptr);
  g.insertNode(nodes[c.firstAfter].get(), def->opType, g.uniqueNodeName(name),
               def->inputs, outputs, def->attrs, def->domain);
  for (ir::Node *user : laterUsers)
    for (ir::Value *&operand : user->inputs)
      if (operand == v)
        operand = again;
  return true;
}

llvm::Error checkTier(const TierLayout &layout, ir::Tier tier, uint64_t capacity,
                      llvm::StringRef flag) {
  uint64_t peak = layout.peak[static_cast<unsigned>(tier)];
  if (!capacity || peak <= capacity)
    return llvm::Error::success();
  return makeError("the plan needs " + llvm::Twine(peak) + " bytes (" + formatSize(peak) +
                   ") of " + ir::tierName(tier) + " memory but the tier holds " +
                   llvm::Twine(capacity) + " (" + formatSize(capacity) + "); use --" + flag +
                   "=" + llvm::Twine(peak) + " or more");
}

llvm::Expected<bool> Allocate::run(ir::Graph &g, PassContext &ctx) {
  const MemoryOptions &mem = ctx.memory;
  bool changed = false;
  TierLayout layout = computeTierLayout(g);
  // Spilling ends when the GPU fits, nothing idle is left at the peak, or
  // several spills in a row stopped lowering it (fragmentation, or a peak
  // made of operands in use).
  uint64_t best = layout.peak[0], bestLive = layout.liveBound[0];
  unsigned sinceBetter = 0;
  while (mem.gpuCapacity && layout.peak[0] > mem.gpuCapacity && sinceBetter < 8) {
    auto candidate = pickSpill(g, layout.peakTime[0]);
    if (!candidate)
      break;
    if (!recompute(g, *candidate))
      spill(g, *candidate, layout.peakTime[0]);
    changed = true;
    layout = computeTierLayout(g);
    // Progress is the packed peak or, through fragmentation, the live bytes
    // under it.
    if (layout.peak[0] < best || layout.liveBound[0] < bestLive) {
      best = std::min(best, layout.peak[0]);
      bestLive = std::min(bestLive, layout.liveBound[0]);
      sinceBetter = 0;
    } else {
      ++sinceBetter;
    }
  }
  if (auto err = checkTier(layout, ir::Tier::Gpu, mem.gpuCapacity, "gpu-mem"))
    return err;
  if (auto err = checkTier(layout, ir::Tier::Cpu, mem.cpuCapacity, "cpu-mem"))
    return err;
  if (auto err = checkTier(layout, ir::Tier::Nvme, mem.nvmeCapacity, "nvme-mem"))
    return err;
  return changed;
}

} // namespace

std::unique_ptr<Pass> createAllocatePass() { return std::make_unique<Allocate>(); }

} // namespace zinc::passes
