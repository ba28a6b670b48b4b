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

/// `fits`, when nonzero, is a capacity place checked the plan fits (the
/// plan's own peak at this capacity may not: a larger capacity spills less).
llvm::Error checkTier(const TierLayout &layout, ir::Tier tier, uint64_t capacity,
                      llvm::StringRef flag, uint64_t fits = 0) {
  uint64_t peak = layout.peak[static_cast<unsigned>(tier)];
  if (!capacity || peak <= capacity)
    return llvm::Error::success();
  uint64_t suggest = std::max(peak, fits);
  return makeError("the plan needs " + llvm::Twine(peak) + " bytes (" + formatSize(peak) +
                   ") of " + ir::tierName(tier) + " memory but the tier holds " +
                   llvm::Twine(capacity) + " (" + formatSize(capacity) + "); use --" + flag +
                   "=" + llvm::Twine(suggest) + " or more");
}

llvm::Expected<bool> Allocate::run(ir::Graph &g, PassContext &ctx) {
  const MemoryOptions &mem = ctx.memory;
  // When place kept the copy its search allocated, nothing changed since:
  // that layout stands.
  if (mem.placedThrough != MemoryOptions::Placed::Allocation || !ctx.layout)
    ctx.layout = std::make_shared<const TierLayout>(computeTierLayout(g));
  const TierLayout &layout = *ctx.layout;
  if (auto err = checkTier(layout, ir::Tier::Gpu, mem.gpuCapacity, "gpu-mem",
                           mem.gpuCapacityThatFits))
    return err;
  if (auto err = checkTier(layout, ir::Tier::Cpu, mem.cpuCapacity, "cpu-mem"))
    return err;
  if (auto err = checkTier(layout, ir::Tier::Nvme, mem.nvmeCapacity, "nvme-mem"))
    return err;
  return false;
}

} // namespace

std::unique_ptr<Pass> createAllocatePass() { return std::make_unique<Allocate>(); }

} // namespace zinc::passes
