//===- PlacementSearch.cpp - Trying placements until every tier fits ------===//
#include "zinc/passes/PlacementSearch.h"
#include "zinc/passes/OptimizerOps.h"
#include "zinc/passes/PassManager.h"
#include "zinc/support/Error.h"
#include <tuple>

namespace zinc::passes {

static std::vector<ir::Tier> candidates(OffloadPolicy policy) {
  switch (policy) {
  case OffloadPolicy::Auto: return {ir::Tier::Gpu, ir::Tier::Cpu, ir::Tier::Nvme};
  case OffloadPolicy::None: return {ir::Tier::Gpu};
  case OffloadPolicy::Cpu: return {ir::Tier::Cpu};
  case OffloadPolicy::Nvme: return {ir::Tier::Nvme};
  }
  return {ir::Tier::Gpu};
}

/// The passes after place, run on a trial copy to see whether it fits.
static llvm::Error tryPlacement(ir::Graph &trial, PassContext &ctx) {
  auto placed = applyPlacement(trial, ctx.memory);
  if (!placed)
    return placed.takeError();
  for (llvm::StringRef next : {"insert-transfers", "spill", "allocate"}) {
    auto pass = createPass(next);
    if (!pass)
      return pass.takeError();
    auto changed = (*pass)->run(trial, ctx);
    if (!changed)
      return changed.takeError();
  }
  return llvm::Error::success();
}

llvm::Error choosePlacement(const ir::Graph &g, PassContext &ctx,
                            std::unique_ptr<ir::Graph> &placed) {
  placed.reset();
  ctx.memory.transfersPlaced = false;
  MemoryOptions &mem = ctx.memory;
  // Without an optimizer (inference) only the parameters' home matters.
  bool training = llvm::any_of(g.nodes(), [](const ir::Node *n) { return isOptimizerNode(*n); });
  OffloadPolicy optimizer = training ? mem.optimizerOffload : OffloadPolicy::None;
  std::vector<std::pair<ir::Tier, ir::Tier>> tries;
  for (ir::Tier opt : candidates(optimizer))
    for (ir::Tier par : candidates(mem.paramsOffload))
      // Parameters never live nearer the GPU than the master weights.
      if (!training || opt != ir::Tier::Gpu || par == ir::Tier::Gpu)
        tries.push_back({opt, par});
  if (tries.empty())
    return makeError("--offload-params=" + ir::tierName(candidates(mem.paramsOffload).front()) +
                     " needs the optimizer off the GPU too (--offload-optimizer=cpu or "
                     "nvme): its fp32 master weights would otherwise stay in GPU memory");
  // Each placement is tried with the requested prefetch distance, then,
  // if that overflows, with prefetches issued just before their use: the
  // shallowest prefetching keeps the fewest copies alive at once.
  unsigned distance = mem.prefetchDistance;
  std::vector<std::tuple<ir::Tier, ir::Tier, unsigned>> attempts;
  for (auto [opt, par] : tries) {
    attempts.push_back({opt, par, distance});
    if (distance > 0)
      attempts.push_back({opt, par, 0});
  }
  auto choose = [&](const std::tuple<ir::Tier, ir::Tier, unsigned> &a) {
    std::tie(mem.optimizerTier, mem.paramsTier, mem.prefetchDistance) = a;
  };
  if (attempts.size() == 1) {
    choose(attempts.front());
    return llvm::Error::success();
  }
  for (const auto &attempt : attempts) {
    choose(attempt);
    std::unique_ptr<ir::Graph> trial = g.clone();
    llvm::Error err = tryPlacement(*trial, ctx);
    if (err) {
      llvm::consumeError(std::move(err));
      continue;
    }
    placed = std::move(trial);
    if (ctx.note) {
      std::string how = mem.prefetchDistance == distance ? "" : ", prefetching just before use";
      if (training)
        ctx.note("placement: optimizer states and master weights in " +
                 ir::tierName(mem.optimizerTier) + ", parameters in " +
                 ir::tierName(mem.paramsTier) + how);
      else
        ctx.note("placement: parameters in " + ir::tierName(mem.paramsTier) + how);
    }
    return llvm::Error::success();
  }
  // Nothing fits: the most offloaded candidate needs the least GPU memory,
  // so allocate's diagnostic on it names the smallest capacity that fits.
  choose(attempts.back());
  return llvm::Error::success();
}

} // namespace zinc::passes
