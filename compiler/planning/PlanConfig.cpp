//===- PlanConfig.cpp - The memory planner's request and decisions --------===//
#include "zinc/planning/PlanConfig.h"
#include "zinc/passes/OptimizerOps.h"
#include "zinc/support/Size.h"
#include "llvm/Support/FormatVariadic.h"

namespace zinc::planning {

PlanRequest PlanRequest::of(const ir::Graph &g,
                            const passes::PassContext &ctx) {
  const MemoryOptions &mem = ctx.memory;
  PlanRequest request;
  request.training = llvm::any_of(
      g.nodes(), [](const ir::Node *n) { return isOptimizerNode(*n); });
  request.optimizerOffload =
      request.training ? mem.optimizerOffload : OffloadPolicy::None;
  request.paramsOffload = mem.paramsOffload;
  request.prefetchDistance = mem.prefetchDistance;
  request.searchLead = mem.searchPrefetchLead && ctx.hardware;
  if (request.searchLead && mem.prefetchTimingGiven && mem.prefetchLead > 0) {
    PlanConfig timing;
    timing.prefetchLead = mem.prefetchLead;
    timing.prefetchCountsQueue = mem.prefetchCountsQueue;
    timing.nvmeFetchesFirst = mem.nvmeFetchesFirst;
    request.givenTiming = timing;
  }
  if (mem.bucketBytesFixed)
    request.bucketBytes = mem.bucketBytes;
  request.hoistIntoStalls = mem.hoistIntoStalls;
  request.delayUpdates = mem.delayUpdates;
  request.delayedUpdates = mem.delayedUpdatePlacement;
  request.ranks = g.ranks;
  request.hardware = ctx.hardware;
  return request;
}

void PlanConfig::applyTo(MemoryOptions &mem) const {
  mem.optimizerTier = optimizerTier;
  mem.paramsTier = paramsTier;
  mem.spreadDelayedUpdates = spreadDelayedUpdates;
  mem.prefetchDistance = prefetchDistance;
  mem.prefetchLead = prefetchLead;
  mem.prefetchCountsQueue = prefetchCountsQueue;
  mem.nvmeFetchesFirst = nvmeFetchesFirst;
  mem.bucketBytes = bucketBytes;
}

std::string PlanConfig::describe() const {
  std::string line = "optimizer " + ir::tierName(optimizerTier).str() +
                     ", parameters " + ir::tierName(paramsTier).str();
  if (prefetchLead > 0) {
    line += ", lead " + llvm::formatv("{0:F1}", prefetchLead).str() +
            (prefetchCountsQueue ? " with the link's queue" : " alone");
    line += nvmeFetchesFirst ? ", NVMe fetches first" : ", NVMe in plan order";
  } else {
    line += ", prefetch distance " + std::to_string(prefetchDistance);
  }
  if (bucketBytes)
    line += ", buckets of " + formatSize(bucketBytes);
  if (spreadDelayedUpdates)
    line += ", delayed updates spread";
  return line;
}

} // namespace zinc::planning
