//===- PlanConfig.h - The memory planner's request, decisions and results -===//
//
// The planner's search as data, as XLA's memory-space assignment keeps it:
// the request is what the user asked for and never changes while the search
// runs; a configuration is one set of decisions (the homes of the optimizer
// states and of the weights, how prefetches are timed, the NVMe link's
// order, the collectives' buckets, where delayed updates go); a candidate
// is a configuration lowered through insert-transfers, spill and allocate:
// its graph, the layout allocate proved and the step the cost model
// predicts for it.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_PLANNING_PLANCONFIG_H
#define ZINC_PLANNING_PLANCONFIG_H

#include "zinc/passes/Pass.h"
#include "zinc/plan/PlanSimulator.h"
#include "llvm/ADT/Optional.h"
#include <memory>
#include <vector>

namespace zinc::planning {

/// One set of decisions: what the passes of a lowering read.
struct PlanConfig {
  ir::Tier optimizerTier = ir::Tier::Gpu;
  ir::Tier paramsTier = ir::Tier::Gpu;
  /// With --dpu: the delayed updates spread over the step, or all at its
  /// start.
  bool spreadDelayedUpdates = false;
  /// Untimed prefetches: how many compute nodes ahead of their use.
  unsigned prefetchDistance = 2;
  /// > 0: prefetches issued where the compute before their use covers
  /// this many times their transfer's time (and, with
  /// prefetchCountsQueue, the copies queued on their link ahead of them).
  double prefetchLead = 0;
  bool prefetchCountsQueue = false;
  /// With prefetchLead: fetches from NVMe pass the link's other traffic
  /// (NvmeQueueOrder.h).
  bool nvmeFetchesFirst = true;
  /// The collectives' bucket size (0: one tensor each).
  uint64_t bucketBytes = 0;

  /// Whether anything lives off the GPU (else there is nothing to
  /// prefetch, and nothing to time).
  bool offloaded() const {
    return optimizerTier != ir::Tier::Gpu || paramsTier != ir::Tier::Gpu;
  }
  /// Writes the decisions into `mem`, where the passes read them.
  void applyTo(MemoryOptions &mem) const;
  /// The decisions in a line, for --print-search: "optimizer nvme,
  /// parameters cpu, lead 2.0 with the link's queue, NVMe fetches first".
  std::string describe() const;
};

/// What the user asked of the memory planner (zinc-compile's flags, read
/// from the context's MemoryOptions once, before the search).
struct PlanRequest {
  /// Whether the graph has optimizer updates (else only the weights'
  /// home matters).
  bool training = false;
  OffloadPolicy optimizerOffload = OffloadPolicy::None;
  OffloadPolicy paramsOffload = OffloadPolicy::None;
  /// --prefetch-distance: compute nodes between a prefetch and its use
  /// when prefetches are not timed.
  unsigned prefetchDistance = 2;
  /// Prefetches timed by simulating the plans they allow (no
  /// --prefetch-distance, and a hardware description to simulate on).
  bool searchLead = false;
  /// With searchLead: the timing to lower instead of searching one
  /// (MemoryOptions::prefetchTimingGiven): its lead, family and NVMe order.
  llvm::Optional<PlanConfig> givenTiming;
  /// --bucket-bytes, when given: the search keeps it.
  llvm::Optional<uint64_t> bucketBytes;
  /// --reorder-compute: compute may move into predicted waits.
  bool hoistIntoStalls = true;
  /// --dpu and --dpu-updates.
  bool delayUpdates = false;
  DelayedUpdatePlacement delayedUpdates = DelayedUpdatePlacement::Auto;
  unsigned ranks = 1;
  const Hardware *hardware = nullptr;

  static PlanRequest of(const ir::Graph &g, const passes::PassContext &ctx);
};

/// A configuration lowered.
struct Candidate {
  PlanConfig config;
  std::unique_ptr<ir::Graph> graph;
  /// What allocate proved for `graph`.
  std::shared_ptr<const TierLayout> layout;
  plan::Prediction predicted;
  /// Compute nodes moved into predicted waits (HoistIntoStalls.h).
  size_t hoisted = 0;
};

} // namespace zinc::planning

#endif
