//===- MemoryOptions.h - Where state may live and how much each tier holds -===//
#ifndef ZINC_PASSES_MEMORYOPTIONS_H
#define ZINC_PASSES_MEMORYOPTIONS_H

#include "zinc/ir/Graph.h"
#include <cstdint>
#include <string>
#include <vector>

namespace zinc {

/// --offload-optimizer / --offload-params. The memory planner (plan-memory)
/// resolves Auto (trying the candidates, cheapest predicted transfers
/// first) into the concrete tiers below, so the passes it runs only ever see
/// concrete tiers.
enum class OffloadPolicy { Auto, None, Cpu, Nvme };

/// --tile: the tile pass picks each operator's tile count (Auto), tiles
/// nothing (None), or gives every tileable large operator `tileCount`
/// tiles (Fixed).
enum class TileMode { Auto, None, Fixed };

/// One operator the tile pass split, for the compile report.
struct TiledNode {
  std::string node;
  std::string op;
  unsigned tiles = 0;
  /// Why: the working set whole and per tile (the tile pass's estimate),
  /// and the budget it had to fit.
  uint64_t wholeWorkingSet = 0;
  uint64_t tileWorkingSet = 0;
  uint64_t budget = 0;
  std::string reason;
};

/// --dpu-updates: the delayed updates all at the start of the step, spread
/// over its compute, or whichever the simulation predicts faster.
enum class DelayedUpdatePlacement { Auto, AtStart, Spread };

/// --activation-checkpointing: recompute forward segments in backward when
/// the activations kept for backward do not fit (Auto), never (None), or
/// for every segment between the forward pass's narrow points (EveryLayer).
enum class CheckpointMode { Auto, None, EveryLayer };

/// What the checkpoint pass chose, for the compile report.
struct CheckpointSummary {
  /// Forward values kept for backward, summed, before and after: what the
  /// step would hold at the turn from forward to backward.
  uint64_t savedBytesBefore = 0;
  uint64_t savedBytesAfter = 0;
  /// Segments recomputed, and the checkpoints (segment inputs) they start
  /// from.
  unsigned recomputedSegments = 0;
  std::vector<std::string> checkpoints;
  uint64_t checkpointBytes = 0;
  /// Forward nodes run again in backward, and their FLOPs per step.
  uint64_t recomputedNodes = 0;
  uint64_t recomputeFlops = 0;
  /// What the kept activations had to fit, and why the pass chose as it did.
  uint64_t budgetBytes = 0;
  std::string reason;
};

struct MemoryOptions {
  /// The tile and checkpoint passes aim for their operator's or the kept
  /// activations' share of the GPU tier: capacity / budgetDivisor, the rest
  /// being for what else is live. When the GPU still does not fit
  /// (passes::DoesNotFit), zinc-compile compiles again with twice the
  /// divisor (more tiles, more recompute), up to kMaxBudgetDivisor.
  unsigned budgetDivisor = 2;
  static constexpr unsigned kMaxBudgetDivisor = 16;
  CheckpointMode checkpointMode = CheckpointMode::Auto;
  /// Set by the checkpoint pass.
  CheckpointSummary checkpointing;
  TileMode tileMode = TileMode::Auto;
  unsigned tileCount = 0;
  /// Set by the tile pass, in program order.
  std::vector<TiledNode> tiled;
  /// Set by the tile pass when an operator cannot fit the GPU even one
  /// output column at a time: what one tile needs, for allocate's
  /// diagnostic when the GPU then overflows.
  std::string untileable;
  /// What the user asked for (zinc-compile's flags).
  OffloadPolicy optimizerOffload = OffloadPolicy::None;
  OffloadPolicy paramsOffload = OffloadPolicy::None;
  /// The planner's decisions (planning::PlanConfig, applied here for the
  /// passes to read). Home of the optimizer states and fp32 master
  /// weights; the optimizer update runs on the host when this is not the
  /// GPU.
  ir::Tier optimizerTier = ir::Tier::Gpu;
  /// Home of the weights the forward and backward passes read.
  ir::Tier paramsTier = ir::Tier::Gpu;
  /// Capacities in bytes; 0 = unbounded.
  uint64_t gpuCapacity = 0;
  uint64_t cpuCapacity = 0;
  uint64_t nvmeCapacity = 0;
  /// How many compute nodes ahead of its use a prefetch is issued, when it
  /// is not timed (prefetchLead 0 or no hardware description).
  unsigned prefetchDistance = 2;
  /// > 0: a prefetch is issued where the compute before its use covers
  /// this many times its transfer's time (PassContext::hardware's rates).
  double prefetchLead = 0;
  /// With prefetchLead: the copies queued on the link between a prefetch's
  /// place and its use count in its timing too.
  bool prefetchCountsQueue = false;
  /// With prefetchLead: fetches from NVMe go ahead of the write-backs and
  /// host-bound state reads queued on that link (NvmeQueueOrder.h). It
  /// holds those copies' CPU sources longer; the planner's lead search
  /// tries the plans with and without it.
  bool nvmeFetchesFirst = true;
  /// > 0: insert-transfers first merges collectives into buckets of at
  /// most this many bytes (BucketCollectives.h); 0: one tensor each.
  uint64_t bucketBytes = 0;
  /// --bucket-bytes was given: the search keeps bucketBytes instead of
  /// choosing it.
  bool bucketBytesFixed = false;
  /// With prefetchLead: the search moves independent compute into the
  /// chosen plan's predicted waits (HoistIntoStalls.h); --reorder-compute=false
  /// turns it off.
  bool hoistIntoStalls = true;
  /// The planner chooses prefetchLead by simulating the plans it allows (the
  /// default of zinc-compile without --prefetch-distance).
  bool searchPrefetchLead = false;
  /// With searchPrefetchLead: prefetchLead, prefetchCountsQueue and
  /// nvmeFetchesFirst are given, not searched (the evaluation program
  /// takes its training plan's): that configuration is lowered, and
  /// prefetches just before use when it does not fit.
  bool prefetchTimingGiven = false;
  /// --dpu: the host update of step i overlaps the forward and backward of
  /// step i+1 (DelayedUpdate.h); the planner applies it with the homes.
  bool delayUpdates = false;
  /// --dpu-updates: where the delayed updates go (DelayedUpdate.h); Auto:
  /// the planner simulates both and keeps the faster.
  DelayedUpdatePlacement delayedUpdatePlacement = DelayedUpdatePlacement::Auto;
  /// With delayUpdates: spread the updates over the step rather than start
  /// it with them (what the planner chose or was told).
  bool spreadDelayedUpdates = false;
  /// Set by the planner when no placement fits the GPU: a capacity it checked
  /// does fit, for allocate's diagnostic to name (0: none was found).
  uint64_t gpuCapacityThatFits = 0;
};

} // namespace zinc

#endif
