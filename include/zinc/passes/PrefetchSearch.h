//===- PrefetchSearch.h - Choosing how far ahead prefetches are issued ----===//
#ifndef ZINC_PASSES_PREFETCHSEARCH_H
#define ZINC_PASSES_PREFETCHSEARCH_H

#include "zinc/passes/Pass.h"
#include "zinc/plan/PlanSimulator.h"

namespace zinc::passes {

/// What the search chose.
struct PrefetchChoice {
  double lead = 0;
  /// Whether the copies queued on a prefetch's link counted in its timing.
  bool countsQueue = false;
  /// Whether fetches from NVMe went ahead of the link's other traffic.
  bool nvmeFetchesFirst = true;
  /// The collectives' bucket size (0: one tensor each).
  uint64_t bucketBytes = 0;
  /// Compute nodes moved into predicted waits (HoistIntoStalls.h).
  size_t hoisted = 0;
  plan::Prediction predicted;
};

/// On `g` with its homes placed: tries prefetch leads (each prefetch issued
/// where the compute before its use covers lead x its transfer time, with
/// or without the copies queued on its link ahead of it) from the shortest
/// up, each through insert-transfers, spill and allocate on a
/// copy of `g`, emits and simulates every one that fits, and keeps the
/// fastest predicted step, each with the NVMe link in plan order and with its
/// fetches first (NvmeQueueOrder.h). It stops at the first lead that does not fit, that
/// gains less than 1%, or whose step is within 1% of its lower bound. When one fits, `g`
/// becomes it (ctx.layout its proven layout, ctx.memory.prefetchLead its
/// lead) and the choice is returned; None when none fits, `g` untouched.
/// Last, unless --bucket-bytes fixed it, the collectives' bucket sizes of
/// bucketSizesToTry are tried at the chosen lead, each kept when it gains
/// 1% (BucketCollectives.h). Then compute is moved into the chosen plan's
/// predicted waits (HoistIntoStalls.h), a round at a time, while the
/// allocator proves it and the step shortens by 1%.
llvm::Expected<llvm::Optional<PrefetchChoice>> choosePrefetchLead(ir::Graph &g,
                                                                  PassContext &ctx);

/// For a placement whose prefetches are not timed (everything on the GPU):
/// sets ctx.memory.bucketBytes to the collectives' bucket size (none, then
/// bucketSizesToTry's from the smallest up) whose plan of `g` (the graph
/// before placement, left untouched) has the fastest predicted step, each
/// size kept when it gains 1%; the first that does not fit or gain ends
/// the search. Nothing when --bucket-bytes fixed it, or without ranks or a
/// hardware description.
llvm::Error chooseBucketSize(const ir::Graph &g, PassContext &ctx);

/// For `g` allocated (ctx.layout its layout): moves compute into the waits
/// of its predicted timeline (HoistIntoStalls.h), a round at a time, each
/// kept when the allocator proves it and the step is predicted 1% faster.
/// Returns the nodes moved (also in ctx.memory.hoistedNodes when some
/// were); nothing without a hardware description or with
/// --reorder-compute=false.
llvm::Expected<size_t> reorderIntoPredictedWaits(ir::Graph &g, PassContext &ctx);

} // namespace zinc::passes

#endif
