//===- PlacementSearch.cpp - Trying placements until every tier fits ------===//
#include "zinc/passes/PlacementSearch.h"
#include "zinc/ir/Parser.h"
#include "zinc/ir/Printer.h"
#include "zinc/passes/OptimizerOps.h"
#include "zinc/support/Error.h"
#include "llvm/Support/raw_ostream.h"
#include <tuple>

namespace zinc {

static std::vector<ir::Tier> candidates(OffloadPolicy policy) {
  switch (policy) {
  case OffloadPolicy::Auto: return {ir::Tier::Gpu, ir::Tier::Cpu, ir::Tier::Nvme};
  case OffloadPolicy::None: return {ir::Tier::Gpu};
  case OffloadPolicy::Cpu: return {ir::Tier::Cpu};
  case OffloadPolicy::Nvme: return {ir::Tier::Nvme};
  }
  return {ir::Tier::Gpu};
}

/// A deep copy through the text form, which round-trips exactly.
static llvm::Expected<std::unique_ptr<ir::Graph>> cloneGraph(const ir::Graph &g) {
  std::string text;
  llvm::raw_string_ostream os(text);
  ir::printGraph(g, os);
  return ir::parseGraph(os.str(), "<placement candidate>");
}

static llvm::Error runPlacement(ir::Graph &g, passes::PassContext &ctx,
                                const std::function<llvm::Error(passes::PassManager &)> &configure) {
  passes::PassManager pm(ctx);
  if (auto err = configure(pm))
    return err;
  if (auto err = pm.parsePipeline("place,insert-transfers,allocate"))
    return err;
  return pm.run(g);
}

llvm::Error placeAndAllocate(
    std::unique_ptr<ir::Graph> &g, passes::PassContext &ctx, OffloadPolicy optimizer,
    OffloadPolicy params,
    const std::function<llvm::Error(passes::PassManager &)> &configure,
    const std::function<void(const llvm::Twine &)> &note) {
  // Without an optimizer (inference) only the parameters' home matters.
  bool training = llvm::any_of(g->nodes(), [](const auto &n) { return isOptimizerNode(*n); });
  if (!training)
    optimizer = OffloadPolicy::None;
  std::vector<std::pair<ir::Tier, ir::Tier>> tries;
  for (ir::Tier opt : candidates(optimizer))
    for (ir::Tier par : candidates(params))
      // Parameters never live nearer the GPU than the master weights.
      if (!training || opt != ir::Tier::Gpu || par == ir::Tier::Gpu)
        tries.push_back({opt, par});
  if (tries.empty())
    return makeError("--offload-params=" + ir::tierName(candidates(params).front()) +
                     " needs the optimizer off the GPU too (--offload-optimizer=cpu or "
                     "nvme): its fp32 master weights would otherwise stay in GPU memory");
  // Each placement is tried with the requested prefetch distance, then,
  // if that overflows, with prefetches issued just before their use: the
  // shallowest prefetching keeps the fewest copies alive at once.
  unsigned distance = ctx.memory.prefetchDistance;
  std::vector<std::tuple<ir::Tier, ir::Tier, unsigned>> attempts;
  for (auto [opt, par] : tries) {
    attempts.push_back({opt, par, distance});
    if (distance > 0)
      attempts.push_back({opt, par, 0});
  }
  bool searching = attempts.size() > 1;
  llvm::Error lastError = llvm::Error::success();
  for (auto [opt, par, depth] : attempts) {
    std::unique_ptr<ir::Graph> candidate;
    if (searching) {
      auto clone = cloneGraph(*g);
      if (!clone)
        return clone.takeError();
      candidate = std::move(*clone);
    } else {
      candidate = std::move(g);
    }
    ctx.memory.optimizerTier = opt;
    ctx.memory.paramsTier = par;
    ctx.memory.prefetchDistance = depth;
    llvm::Error err = runPlacement(*candidate, ctx, configure);
    if (!err) {
      llvm::consumeError(std::move(lastError));
      std::string how = depth == distance ? "" : ", prefetching just before use";
      if (searching && training)
        note("placement: optimizer states and master weights in " +
             ir::tierName(opt) + ", parameters in " + ir::tierName(par) + how);
      else if (searching)
        note("placement: parameters in " + ir::tierName(par) + how);
      g = std::move(candidate);
      return llvm::Error::success();
    }
    if (!searching)
      return err;
    llvm::consumeError(std::move(lastError));
    lastError = std::move(err);
  }
  return lastError;
}

} // namespace zinc
