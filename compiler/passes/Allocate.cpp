//===- Allocate.cpp - allocate: prove every tier fits ---------------------===//
//
// Lays out each tier (TierLayout: best-fit static offsets over live
// intervals) and checks the peaks against the capacities. What stops being
// kept when the GPU overflows was decided before, by the spill pass; here a
// tier that still overflows is an error naming the capacity this plan needs,
// which is one that would fit. The offsets themselves are computed again,
// from the same function, when the plan is emitted.
//
//===----------------------------------------------------------------------===//
#include "zinc/passes/DoesNotFit.h"
#include "zinc/passes/Pass.h"
#include "zinc/passes/TierLayout.h"
#include "zinc/support/Error.h"
#include "zinc/support/Size.h"

#include <algorithm>

namespace zinc::passes {
namespace {

class Allocate : public Pass {
public:
  llvm::StringRef getName() const override { return "Allocate Tiers"; }
  llvm::StringRef getArgument() const override { return "allocate"; }
  llvm::Expected<bool> run(ir::Graph &g, PassContext &ctx) override;
};

/// What fills `tier` at its busiest instant: the largest buffers live
/// there, so a user (or a developer) sees what to shrink.
std::string busiestInstant(const ir::Graph &g, const TierLayout &layout, ir::Tier tier) {
  int64_t time = layout.peakTime[static_cast<unsigned>(tier)];
  std::vector<std::pair<uint64_t, const ir::Value *>> live;
  for (const auto &v : g.values()) {
    const BufferInterval &interval = layout.intervals.at(v.get());
    if (v->tier == tier && interval.begin <= time && time <= interval.end)
      live.push_back({interval.size, v.get()});
  }
  llvm::sort(live, [](const auto &a, const auto &b) {
    return a.first != b.first ? a.first > b.first : a.second->id < b.second->id;
  });
  std::string text;
  llvm::raw_string_ostream os(text);
  const ir::Node *at = nullptr;
  int64_t index = 0;
  for (const ir::Node *n : g.nodes())
    if (index++ == time) {
      at = n;
      break;
    }
  os << "; at its busiest";
  if (at)
    os << " (" << at->describe() << ")";
  os << " " << live.size() << " buffers are live, the largest";
  for (size_t i = 0; i < live.size() && i < 3; ++i)
    os << (i ? ", '" : " '") << live[i].second->name << "' ("
       << formatSize(live[i].first) << ")";
  return os.str();
}

/// `fits`, when nonzero, is a capacity the planner checked the plan fits (the
/// plan's own peak at this capacity may not: a larger capacity spills less).
llvm::Error checkTier(const ir::Graph &g, const TierLayout &layout, ir::Tier tier,
                      uint64_t capacity, llvm::StringRef flag, uint64_t fits = 0,
                      llvm::StringRef why = "") {
  uint64_t peak = layout.peak[static_cast<unsigned>(tier)];
  if (!capacity || peak <= capacity)
    return llvm::Error::success();
  uint64_t suggest = std::max(peak, fits);
  return llvm::make_error<DoesNotFit>(
      tier, peak,
      ("the plan needs " + llvm::Twine(peak) + " bytes (" + formatSize(peak) + ") of " +
       ir::tierName(tier) + " memory but the tier holds " + llvm::Twine(capacity) + " (" +
       formatSize(capacity) + "); use --" + flag + "=" + llvm::Twine(suggest) + " or more" +
       busiestInstant(g, layout, tier) + (why.empty() ? "" : "; ") + why)
          .str());
}

llvm::Expected<bool> Allocate::run(ir::Graph &g, PassContext &ctx) {
  const MemoryOptions &mem = ctx.memory;
  // A partial layout is spill's: the tiers it packed that nothing changed
  // since stand.
  ctx.layout = std::make_shared<const TierLayout>(
      ctx.layout && !ctx.layout->complete() ? completeTierLayout(g, *ctx.layout)
                                            : computeTierLayout(g));
  const TierLayout &layout = *ctx.layout;
  if (auto err = checkTier(g, layout, ir::Tier::Gpu, mem.gpuCapacity, "gpu-mem",
                           mem.gpuCapacityThatFits, mem.untileable))
    return err;
  if (auto err = checkTier(g, layout, ir::Tier::Cpu, mem.cpuCapacity, "cpu-mem"))
    return err;
  if (auto err = checkTier(g, layout, ir::Tier::Nvme, mem.nvmeCapacity, "nvme-mem"))
    return err;
  return false;
}

} // namespace

std::unique_ptr<Pass> createAllocatePass() { return std::make_unique<Allocate>(); }

} // namespace zinc::passes
