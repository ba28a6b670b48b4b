//===- PrefetchSearch.cpp - Choosing how far ahead prefetches are issued --===//
//
// The overlap scheduler's search: a prefetch issued too late stalls compute,
// one issued too early holds its copy (GPU memory) longer and may need
// spills. Which lead is right depends on the bytes, the links and what else
// is in flight, so each candidate is compiled to a plan and the simulator
// (plan/PlanSimulator.h) predicts its step; only placements the allocator
// proves are candidates. Leads double from 1: few trials, and memory grows
// with the lead, so the first that does not fit ends the search.
//
//===----------------------------------------------------------------------===//
#include "zinc/passes/PrefetchSearch.h"
#include "zinc/passes/BucketCollectives.h"
#include "zinc/passes/EmitPlan.h"
#include "zinc/passes/HoistIntoStalls.h"
#include "zinc/passes/PassManager.h"
#include "zinc/passes/PlacementSearch.h"
#include <limits>

namespace zinc::passes {

using Placed = MemoryOptions::Placed;

static constexpr double kLeads[] = {1, 2, 4, 8};
/// A longer lead must shorten the predicted step by this much to be kept.
static constexpr double kMinGain = 0.01;
/// What a plan timed without the link's queue must gain over the best one
/// timed with it. On the cpu backend the bundled example's plans of that
/// family measured 1.6x their predicted step (10-11 ms against 6.6-7), the
/// queue-aware ones 0.94-1.18x, in alternating runs (bench/README.md,
/// predicted_step.py): the model does not yet see what the later issue
/// costs, so a small predicted gain is not believed.
static constexpr double kUnqueuedMinGain = 0.10;

/// The predicted step of `g` as allocate left it (its layout in ctx). The
/// plan is only simulated, so it lives on an arena: its messages and
/// strings go at once, not one by one.
static llvm::Expected<plan::Prediction> predict(const ir::Graph &g, const PassContext &ctx) {
  EmitOptions opts;
  opts.mode = "train";
  opts.layout = ctx.layout.get();
  opts.gpuCapacity = ctx.memory.gpuCapacity;
  opts.cpuCapacity = ctx.memory.cpuCapacity;
  opts.nvmeCapacity = ctx.memory.nvmeCapacity;
  opts.gradAccum = static_cast<unsigned>(ctx.training.gradAccum);
  google::protobuf::ArenaOptions arenaOptions;
  arenaOptions.start_block_size = 64 << 10;
  arenaOptions.max_block_size = 4 << 20;
  google::protobuf::Arena arena(arenaOptions);
  auto *plan = google::protobuf::Arena::CreateMessage<plan::Plan>(&arena);
  if (llvm::Error err = emitPlanInto(g, opts, *plan))
    return std::move(err);
  return plan::simulatePlan(*plan, *ctx.hardware);
}

/// Runs `passes` on a trial copy and predicts its step; None when the
/// trial does not fit. A trial that does not fit is the search's to handle
/// (it ends that search), not an overflow of the compilation: zinc-compile's
/// retry with smaller tiles and checkpoints must not see it
/// (MemoryOptions::gpuOverflowed).
static llvm::Expected<llvm::Optional<plan::Prediction>>
compileAndPredict(ir::Graph &trial, PassContext &ctx,
                  std::initializer_list<llvm::StringRef> passes) {
  bool overflowed = ctx.memory.gpuOverflowed;
  if (llvm::Error err = runPassesNamed(trial, ctx, passes)) {
    llvm::consumeError(std::move(err));
    ctx.memory.gpuOverflowed = overflowed;
    ctx.layout.reset();
    return llvm::None;
  }
  auto predicted = predict(trial, ctx);
  if (!predicted)
    return predicted.takeError();
  return std::move(*predicted);
}

/// Both timing families, each from the shortest lead up, at the queue
/// order ctx.memory says; improves `best` and `choice` in place.
static llvm::Error searchFamilies(ir::Graph &g, PassContext &ctx,
                                  std::unique_ptr<ir::Graph> &best,
                                  std::shared_ptr<const TierLayout> &bestLayout,
                                  PrefetchChoice &choice) {
  MemoryOptions &mem = ctx.memory;
  double bestStep = best ? choice.predicted.stepSeconds
                         : std::numeric_limits<double>::infinity();
  for (bool queued : {true, false}) {
    mem.prefetchCountsQueue = queued;
    double familyBest = std::numeric_limits<double>::infinity();
    for (double lead : kLeads) {
      mem.prefetchLead = lead;
      std::unique_ptr<ir::Graph> trial = g.clone();
      auto predicted = compileAndPredict(*trial, ctx, {"insert-transfers", "spill", "allocate"});
      if (!predicted)
        return predicted.takeError();
      if (!*predicted)
        break;
      double step = (*predicted)->stepSeconds;
      double lowerBound = (*predicted)->lowerBoundSeconds;
      bool gains = step < familyBest * (1 - kMinGain);
      familyBest = std::min(familyBest, step);
      double needed = best && choice.countsQueue && !queued ? kUnqueuedMinGain : kMinGain;
      if (step < bestStep * (1 - needed)) {
        best = std::move(trial);
        bestLayout = ctx.layout;
        bestStep = step;
        choice.lead = lead;
        choice.countsQueue = queued;
        choice.nvmeFetchesFirst = mem.nvmeFetchesFirst;
        choice.predicted = std::move(**predicted);
      }
      ctx.layout.reset();
      if (!gains || lowerBound >= (1 - kMinGain) * step)
        break;
    }
    if (choice.predicted.overlapEfficiency() >= 1 - kMinGain && best)
      break; // Nothing left to gain.
  }
  return llvm::Error::success();
}

/// At the chosen lead and queue orders, the collectives' bucket sizes from
/// the smallest up; each kept when it shortens the predicted step by 1%.
/// Larger buckets hold more bytes (gathers run earlier, reductions wait for
/// their last member), so the first that does not fit or does not gain
/// ends the search. (What a bucket saves is more than its latency: a
/// gather moved up to its bucket's first member also starts earlier.)
static llvm::Error searchBucketSizes(ir::Graph &g, PassContext &ctx,
                                     std::unique_ptr<ir::Graph> &best,
                                     std::shared_ptr<const TierLayout> &bestLayout,
                                     PrefetchChoice &choice) {
  MemoryOptions &mem = ctx.memory;
  if (mem.bucketBytesFixed || !best)
    return llvm::Error::success();
  // One rank has no collectives; a step within 1% of its bound has
  // nothing left to gain.
  if (g.ranks <= 1 || choice.predicted.overlapEfficiency() >= 1 - kMinGain)
    return llvm::Error::success();
  mem.prefetchLead = choice.lead;
  mem.prefetchCountsQueue = choice.countsQueue;
  mem.nvmeFetchesFirst = choice.nvmeFetchesFirst;
  for (uint64_t bytes : bucketSizesToTry(*ctx.hardware, g.ranks)) {
    mem.bucketBytes = bytes;
    std::unique_ptr<ir::Graph> trial = g.clone();
    auto predicted = compileAndPredict(*trial, ctx, {"insert-transfers", "spill", "allocate"});
    if (!predicted)
      return predicted.takeError();
    if (!*predicted || !((*predicted)->stepSeconds <
                         choice.predicted.stepSeconds * (1 - kMinGain))) {
      ctx.layout.reset();
      break; // Larger ones would save little more, holding more memory.
    }
    best = std::move(trial);
    bestLayout = ctx.layout;
    choice.bucketBytes = bytes;
    choice.predicted = std::move(**predicted);
    ctx.layout.reset();
  }
  mem.bucketBytes = choice.bucketBytes;
  return llvm::Error::success();
}

/// Rounds of hoisting compute into the waits of the best plan's predicted
/// timeline (HoistIntoStalls.h), each re-allocated and kept when it
/// shortens the predicted step by 1%.
static constexpr unsigned kHoistRounds = 3;
/// A wait shorter than this many kernel launches is not worth filling.
static constexpr double kMinStallLaunches = 4;

/// Rounds of hoistIntoStalls on `current` (allocated, `layout` its proven
/// layout, `predicted` its step), each on a copy, re-allocated and kept
/// (swapped into `current`) when it shortens the step by 1%. Returns the
/// nodes moved.
static llvm::Expected<size_t> hoistRounds(ir::Graph &current, PassContext &ctx,
                                          std::shared_ptr<const TierLayout> &layout,
                                          plan::Prediction &predicted) {
  MemoryOptions &mem = ctx.memory;
  // Where the compute's own cores copy, a wait filled with compute is a
  // core taken from the copy: the simulation's gain is not there.
  if (!mem.hoistIntoStalls || !ctx.hardware || !ctx.hardware->copyEngines)
    return 0;
  double minStall = kMinStallLaunches * ctx.hardware->kernelLaunchSeconds;
  size_t total = 0;
  Placed was = mem.placedThrough;
  for (unsigned round = 0; round < kHoistRounds; ++round) {
    // All hoisting can gain is the waits: not worth a trial when small.
    if (predictedComputeWaits(current, predicted.timeline, minStall) <
        kMinGain * predicted.stepSeconds)
      break;
    std::unique_ptr<ir::Graph> trial = current.clone();
    size_t moved = hoistIntoStalls(*trial, predicted.timeline, minStall);
    if (!moved)
      break;
    mem.placedThrough = Placed::Homes;
    ctx.layout.reset();
    auto step = compileAndPredict(*trial, ctx, {"allocate"});
    if (!step)
      return step.takeError();
    if (!*step || !((*step)->stepSeconds < predicted.stepSeconds * (1 - kMinGain)))
      break;
    current.swap(*trial); // Its values are now current's, so the layout holds.
    layout = ctx.layout;
    predicted = std::move(**step);
    total += moved;
  }
  ctx.layout.reset();
  mem.placedThrough = was;
  return total;
}

llvm::Expected<size_t> reorderIntoPredictedWaits(ir::Graph &g, PassContext &ctx) {
  if (!ctx.memory.hoistIntoStalls || !ctx.hardware || !ctx.hardware->copyEngines ||
      !ctx.layout ||
      ctx.memory.placedThrough != Placed::Allocation)
    return 0;
  auto predicted = predict(g, ctx);
  if (!predicted)
    return predicted.takeError();
  std::shared_ptr<const TierLayout> layout = ctx.layout;
  auto moved = hoistRounds(g, ctx, layout, *predicted);
  ctx.layout = std::move(layout);
  ctx.memory.placedThrough = Placed::Allocation;
  if (moved)
    ctx.memory.hoistedNodes = *moved;
  return moved;
}

llvm::Error chooseBucketSize(const ir::Graph &g, PassContext &ctx) {
  MemoryOptions &mem = ctx.memory;
  if (mem.bucketBytesFixed || !ctx.hardware || g.ranks <= 1)
    return llvm::Error::success();
  std::vector<uint64_t> sizes = bucketSizesToTry(*ctx.hardware, g.ranks);
  if (sizes.empty())
    return llvm::Error::success();
  sizes.insert(sizes.begin(), 0);
  double bestStep = std::numeric_limits<double>::infinity();
  uint64_t chosen = 0;
  for (uint64_t bytes : sizes) {
    mem.bucketBytes = bytes;
    std::unique_ptr<ir::Graph> trial = g.clone();
    auto placed = applyPlacement(*trial, mem);
    if (!placed) { // The caller's own placement will say why.
      llvm::consumeError(placed.takeError());
      break;
    }
    auto predicted = compileAndPredict(*trial, ctx, {"insert-transfers", "spill", "allocate"});
    ctx.memory.placedThrough = MemoryOptions::Placed::Homes;
    ctx.layout.reset();
    if (!predicted)
      return predicted.takeError();
    if (!*predicted || !((*predicted)->stepSeconds < bestStep * (1 - kMinGain)))
      break; // Larger ones would save little more, holding more memory.
    bestStep = (*predicted)->stepSeconds;
    chosen = bytes;
  }
  mem.bucketBytes = chosen;
  return llvm::Error::success();
}

llvm::Expected<llvm::Optional<PrefetchChoice>> choosePrefetchLead(ir::Graph &g,
                                                                  PassContext &ctx) {
  MemoryOptions &mem = ctx.memory;
  // Each trial runs the passes from insert-transfers on.
  mem.placedThrough = MemoryOptions::Placed::Homes;
  std::unique_ptr<ir::Graph> best;
  std::shared_ptr<const TierLayout> bestLayout;
  PrefetchChoice choice;
  // Two ways to time a prefetch: by its own transfer alone, or counting the
  // copies queued on its link ahead of it too (which issues it earlier,
  // holding its staging copy longer). Each is searched from the shortest
  // lead up; the fastest predicted step of either is kept (the queue-aware
  // family first: it wins ties). Each family runs with the NVMe link in
  // plan order, then with its fetches first (NvmeQueueOrder.h): that helps
  // a compute-bound step whose fetches wait behind optimizer traffic
  // (gpt-13b, fp16, --dpu: 38.1 -> 34.2 s predicted) and hurts one whose CPU
  // tier is full, where the sources it holds longer spill (gpt-175b: 46 GiB
  // more NVMe traffic, 321 -> 417 s), so the simulation decides.
  if (!mem.bucketBytesFixed)
    mem.bucketBytes = 0; // Leads are searched unbucketed; sizes after.
  choice.bucketBytes = mem.bucketBytes;
  bool nvmeHomes = mem.optimizerTier == ir::Tier::Nvme || mem.paramsTier == ir::Tier::Nvme;
  for (bool fetchesFirst : {false, true}) {
    if (fetchesFirst && !nvmeHomes)
      break; // No fetches from NVMe: the same plans again.
    mem.nvmeFetchesFirst = fetchesFirst;
    if (llvm::Error err = searchFamilies(g, ctx, best, bestLayout, choice))
      return std::move(err);
  }
  if (llvm::Error err = searchBucketSizes(g, ctx, best, bestLayout, choice))
    return std::move(err);
  if (best) {
    auto moved = hoistRounds(*best, ctx, bestLayout, choice.predicted);
    if (!moved)
      return moved.takeError();
    choice.hoisted = *moved;
  }
  if (!best) {
    mem.nvmeFetchesFirst = true;
    mem.prefetchLead = 0;
    return llvm::None;
  }
  g.swap(*best); // Its values are now g's, so the proven layout holds.
  ctx.layout = std::move(bestLayout);
  mem.prefetchLead = choice.lead;
  mem.prefetchCountsQueue = choice.countsQueue;
  mem.nvmeFetchesFirst = choice.nvmeFetchesFirst;
  mem.hoistedNodes = choice.hoisted;
  mem.placedThrough = MemoryOptions::Placed::Allocation;
  return choice;
}

} // namespace zinc::passes
