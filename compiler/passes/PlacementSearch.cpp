//===- PlacementSearch.cpp - Trying placements until every tier fits ------===//
#include "zinc/passes/PlacementSearch.h"
#include "zinc/passes/OptimizerOps.h"
#include "zinc/passes/PassManager.h"
#include "zinc/passes/PrefetchSearch.h"
#include "zinc/passes/Spill.h"
#include "zinc/support/Error.h"
#include "zinc/support/Size.h"
#include "llvm/Support/FormatVariadic.h"
#include <tuple>

namespace zinc::passes {

using Placed = MemoryOptions::Placed;

static std::vector<ir::Tier> candidates(OffloadPolicy policy) {
  switch (policy) {
  case OffloadPolicy::Auto: return {ir::Tier::Gpu, ir::Tier::Cpu, ir::Tier::Nvme};
  case OffloadPolicy::None: return {ir::Tier::Gpu};
  case OffloadPolicy::Cpu: return {ir::Tier::Cpu};
  case OffloadPolicy::Nvme: return {ir::Tier::Nvme};
  }
  return {ir::Tier::Gpu};
}

/// Tells the user which placement fits, and how its prefetches were timed.
static void notePlacement(const PassContext &ctx, bool training, bool justBeforeUse) {
  if (!ctx.note)
    return;
  const MemoryOptions &mem = ctx.memory;
  std::string dpu = !mem.delayUpdates         ? ""
                    : mem.spreadDelayedUpdates ? ", delayed updates spread over the step"
                                               : ", delayed updates at the start of the step";
  std::string how = justBeforeUse ? ", prefetching just before use"
                    : mem.prefetchLead > 0
                        ? ", prefetching " + llvm::formatv("{0:F1}", mem.prefetchLead).str() +
                              "x each transfer's time ahead" +
                              (mem.prefetchCountsQueue ? " and its link's queue" : "") +
                              (mem.nvmeFetchesFirst ? ", fetches from NVMe first" : "") +
                              " (the fastest predicted step that fits)"
                        : "";
  std::string buckets =
      mem.bucketBytes ? ", collectives in buckets of up to " + formatSize(mem.bucketBytes) : "";
  if (mem.hoistedNodes)
    buckets += ", " + std::to_string(mem.hoistedNodes) + " compute nodes moved into waits";
  if (training)
    ctx.note("placement: optimizer states and master weights in " +
             ir::tierName(mem.optimizerTier) + ", parameters in " +
             ir::tierName(mem.paramsTier) + how + dpu + buckets);
  else
    ctx.note("placement: parameters in " + ir::tierName(mem.paramsTier) + how);
}

static ir::Tier towardsGpu(ir::Tier t) { return t == ir::Tier::Nvme ? ir::Tier::Cpu : ir::Tier::Gpu; }

/// Whether `n` is a copy insert-transfers made to bring a value nearer the
/// GPU: a prefetch, which the prefetch distance places.
static bool isPrefetch(const ir::Node &n) {
  if (n.domain != kZincDomain || n.opType != "Copy" || !n.inputs[0] || !n.outputs[0])
    return false;
  ir::Tier from = n.inputs[0]->tier, to = n.outputs[0]->tier;
  return from != ir::Tier::Gpu && to == towardsGpu(from);
}

/// Moves `copy` just before `user`, and the prefetches it reads just before
/// it: a chain NVMe -> CPU -> GPU ends up right ahead of its first user.
static void sinkBefore(ir::Graph &g, ir::Node *copy, ir::Node *user,
                       llvm::DenseSet<const ir::Node *> &sunk) {
  sunk.insert(copy);
  g.moveBefore(copy, user);
  ir::Node *source = copy->inputs[0]->def;
  if (source && isPrefetch(*source) && !sunk.count(source))
    sinkBefore(g, source, copy, sunk);
}

/// What insert-transfers does with a prefetch distance of 0, from what it
/// did with a larger one: the same copies (which copy a use reads does not
/// depend on the distance), each moved down to just before its first user.
/// Never past a write of its source: insert-transfers issues no prefetch
/// ahead of a write its user must see.
static void sinkPrefetches(ir::Graph &g) {
  llvm::DenseSet<const ir::Node *> sunk;
  std::vector<ir::Node *> order(g.nodes().begin(), g.nodes().end());
  for (ir::Node *user : order) {
    if (isPrefetch(*user))
      continue; // Sunk with the user it feeds.
    for (ir::Value *in : user->inputs)
      if (in && in->def && isPrefetch(*in->def) && !sunk.count(in->def))
        sinkBefore(g, in->def, user, sunk);
  }
}

/// When nothing fits, allocate names the GPU peak the plan reached at the
/// capacity given. Spill relieves only what overflows that capacity, so at
/// a larger one it spills less and the packing can need a little more than
/// the peak named. So the capacity to name is checked: `compile` (the
/// placement and the passes after it, on a copy of `g`) runs again at the
/// peak reached, then at the next peak, until one fits. 0 when none does
/// within a few tries.
static uint64_t findCapacityThatFits(
    const ir::Graph &g, PassContext &ctx,
    llvm::function_ref<llvm::Error(ir::Graph &)> compile) {
  MemoryOptions &mem = ctx.memory;
  const uint64_t asked = mem.gpuCapacity;
  uint64_t fits = 0;
  for (int attempt = 0; attempt < 8; ++attempt) {
    std::unique_ptr<ir::Graph> trial = g.clone();
    llvm::Error err = compile(*trial);
    if (!err) {
      fits = mem.gpuCapacity;
      break;
    }
    llvm::consumeError(std::move(err));
    if (!ctx.layout)
      break; // It failed before allocate: no capacity to try.
    uint64_t peak = ctx.layout->peak[static_cast<unsigned>(ir::Tier::Gpu)];
    if (peak <= mem.gpuCapacity)
      break; // Another tier overflowed.
    mem.gpuCapacity = peak;
    ctx.layout.reset();
  }
  mem.gpuCapacity = asked;
  ctx.layout.reset();
  mem.placedThrough = Placed::Homes;
  return fits == asked ? 0 : fits;
}

/// `g` with its copies inserted just before their use (prefetch distance 0,
/// the fewest copies alive at once): spilled and allocated, or, when even
/// that overflows the GPU, left for allocate to report with the capacity
/// that would fit.
static llvm::Expected<bool> placeJustBeforeUse(ir::Graph &g, PassContext &ctx, bool training) {
  MemoryOptions &mem = ctx.memory;
  // Kept unspilled, for the capacity search should this not fit.
  std::unique_ptr<ir::Graph> unspilled = g.clone();
  if (auto err = runPassesNamed(g, ctx, {"spill"}))
    return err;
  mem.placedThrough = Placed::Spills;
  // An overflow is allocate's to report, with the capacity that would fit.
  llvm::Error err = runPassesNamed(g, ctx, {"allocate"});
  if (err) {
    llvm::consumeError(std::move(err));
    ctx.layout.reset();
    mem.gpuCapacityThatFits =
        findCapacityThatFits(*unspilled, ctx, [&](ir::Graph &trial) {
          return runPassesNamed(trial, ctx, {"spill", "allocate"});
        });
    mem.placedThrough = Placed::Spills;
    return true;
  }
  mem.placedThrough = Placed::Allocation;
  notePlacement(ctx, training, true);
  return true;
}

/// Whether place chooses the prefetch lead by simulation.
static bool searchesLead(const PassContext &ctx) {
  return ctx.memory.searchPrefetchLead && ctx.hardware;
}

/// With the cost model choosing the schedule: compute of the allocated `g`
/// moves into the waits of its predicted timeline (ZeRO-3's gathers on a
/// plan with nothing to prefetch), when that is proven and faster.
static llvm::Error reorderWhenSearching(ir::Graph &g, PassContext &ctx) {
  if (!searchesLead(ctx))
    return llvm::Error::success();
  auto moved = reorderIntoPredictedWaits(g, ctx);
  return moved ? llvm::Error::success() : moved.takeError();
}

/// One placement, two prefetch distances (the requested one, then 0): both
/// share the homes and the copies, so they are made once on `g`. When the
/// GPU fits without spilling, nothing needs trying on a copy of the graph.
static llvm::Expected<bool> placeWithFallbackDistance(ir::Graph &g, PassContext &ctx,
                                                      bool training) {
  MemoryOptions &mem = ctx.memory;
  auto note = [&] { notePlacement(ctx, training, mem.prefetchDistance == 0); };
  if (auto placed = applyPlacement(g, mem); !placed)
    return placed.takeError();
  if (auto err = runPassesNamed(g, ctx, {"insert-transfers"}))
    return err;
  mem.placedThrough = Placed::Transfers;
  if (gpuFitsUnspilled(g, mem.gpuCapacity)) {
    llvm::Error err = runPassesNamed(g, ctx, {"allocate"});
    if (!err) {
      mem.placedThrough = Placed::Allocation;
      if (auto err = reorderWhenSearching(g, ctx))
        return std::move(err);
      note();
      return true;
    }
    llvm::consumeError(std::move(err));
    ctx.layout.reset();
  } else {
    // Spilling at this distance may not fit, and spills are not undone:
    // they are tried on a copy.
    std::unique_ptr<ir::Graph> trial = g.clone();
    llvm::Error err = runPassesNamed(*trial, ctx, {"spill", "allocate"});
    if (!err) {
      g.swap(*trial); // Its values are now g's, so the proven layout holds.
      mem.placedThrough = Placed::Allocation;
      note();
      return true;
    }
    llvm::consumeError(std::move(err));
    ctx.layout.reset(); // The trial's, gone with it.
  }
  sinkPrefetches(g);
  mem.prefetchDistance = 0;
  return placeJustBeforeUse(g, ctx, training);
}

/// Applies the placement to `g` and searches its prefetch lead. With --dpu
/// the delayed updates can start the step or be spread over it: both are
/// placed and searched on copies, and the faster predicted step is kept.
/// None when nothing fits; `g` then has the placement applied (updates at
/// the start) and nothing more.
static llvm::Expected<llvm::Optional<PrefetchChoice>> placeTimed(ir::Graph &g,
                                                                 PassContext &ctx) {
  MemoryOptions &mem = ctx.memory;
  if (!mem.delayUpdates) {
    if (auto placed = applyPlacement(g, mem); !placed)
      return placed.takeError();
    return choosePrefetchLead(g, ctx);
  }
  std::unique_ptr<ir::Graph> best;
  std::shared_ptr<const TierLayout> bestLayout;
  llvm::Optional<PrefetchChoice> bestChoice;
  bool bestSpread = false;
  std::vector<bool> arrangements;
  if (mem.delayedUpdatePlacement != DelayedUpdatePlacement::Spread)
    arrangements.push_back(false);
  if (mem.delayedUpdatePlacement != DelayedUpdatePlacement::AtStart)
    arrangements.push_back(true);
  for (bool spread : arrangements) {
    mem.spreadDelayedUpdates = spread;
    std::unique_ptr<ir::Graph> trial = g.clone();
    if (auto placed = applyPlacement(*trial, mem); !placed)
      return placed.takeError();
    auto chosen = choosePrefetchLead(*trial, ctx);
    if (!chosen)
      return chosen.takeError();
    if (*chosen &&
        (!bestChoice || (*chosen)->predicted.stepSeconds < bestChoice->predicted.stepSeconds)) {
      best = std::move(trial);
      bestLayout = ctx.layout;
      bestChoice = std::move(*chosen);
      bestSpread = spread;
    }
    ctx.layout.reset();
  }
  mem.spreadDelayedUpdates = bestChoice ? bestSpread : arrangements.front();
  if (!bestChoice) {
    if (auto placed = applyPlacement(g, mem); !placed)
      return placed.takeError();
    return llvm::None;
  }
  g.swap(*best); // Its values are now g's, so the proven layout holds.
  ctx.layout = std::move(bestLayout);
  mem.prefetchLead = bestChoice->lead;
  mem.bucketBytes = bestChoice->bucketBytes;
  mem.hoistedNodes = bestChoice->hoisted;
  mem.placedThrough = Placed::Allocation;
  return bestChoice;
}

/// One placement, timed prefetches: the lead the simulation prefers among
/// those that fit, else prefetches just before use.
static llvm::Expected<bool> placeWithLeadSearch(ir::Graph &g, PassContext &ctx,
                                                bool training) {
  MemoryOptions &mem = ctx.memory;
  // Nothing to prefetch: nothing to time but the collectives' buckets.
  if (mem.optimizerTier == ir::Tier::Gpu && mem.paramsTier == ir::Tier::Gpu) {
    if (auto err = chooseBucketSize(g, ctx))
      return err;
    return placeWithFallbackDistance(g, ctx, training);
  }
  auto chosen = placeTimed(g, ctx);
  if (!chosen)
    return chosen.takeError();
  if (*chosen) {
    notePlacement(ctx, training, false);
    return true;
  }
  mem.prefetchDistance = 0;
  if (auto err = runPassesNamed(g, ctx, {"insert-transfers"}))
    return err;
  mem.placedThrough = Placed::Transfers;
  return placeJustBeforeUse(g, ctx, training);
}

llvm::Expected<bool> choosePlacement(ir::Graph &g, PassContext &ctx) {
  ctx.memory.placedThrough = Placed::Homes;
  ctx.memory.hoistedNodes = 0;
  ctx.layout.reset();
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
  unsigned distance = mem.prefetchDistance;
  bool search = searchesLead(ctx);
  auto choose = [&](std::pair<ir::Tier, ir::Tier> tiers, unsigned d) {
    std::tie(mem.optimizerTier, mem.paramsTier) = tiers;
    mem.prefetchDistance = d;
    mem.prefetchLead = 0;
  };
  if (tries.size() == 1) {
    choose(tries.front(), distance);
    if (search)
      return placeWithLeadSearch(g, ctx, training);
    if (distance == 0)
      return applyPlacement(g, mem); // The pipeline's passes do the rest.
    return placeWithFallbackDistance(g, ctx, training);
  }
  // Each placement is tried with timed prefetches (the lead the simulation
  // prefers) or the requested prefetch distance, then, if that overflows,
  // with prefetches issued just before their use: the shallowest
  // prefetching keeps the fewest copies alive at once.
  struct Attempt {
    std::pair<ir::Tier, ir::Tier> tiers;
    unsigned distance;
    bool timed;
  };
  std::vector<Attempt> attempts;
  for (auto tiers : tries) {
    // All on the GPU: nothing to prefetch, nothing to time.
    bool timed = search && (tiers.first != ir::Tier::Gpu || tiers.second != ir::Tier::Gpu);
    attempts.push_back({tiers, timed ? 0 : distance, timed});
    if (timed || distance > 0)
      attempts.push_back({tiers, 0, false});
  }
  for (const Attempt &attempt : attempts) {
    choose(attempt.tiers, attempt.distance);
    std::unique_ptr<ir::Graph> trial = g.clone();
    if (attempt.timed) {
      auto chosen = placeTimed(*trial, ctx);
      if (!chosen) {
        llvm::consumeError(chosen.takeError());
        continue;
      }
      if (!*chosen)
        continue;
    } else {
      if (search)
        if (auto err = chooseBucketSize(g, ctx))
          return err;
      if (auto placed = applyPlacement(*trial, mem); !placed) {
        llvm::consumeError(placed.takeError());
        continue;
      }
      if (llvm::Error err =
              runPassesNamed(*trial, ctx, {"insert-transfers", "spill", "allocate"})) {
        llvm::consumeError(std::move(err));
        ctx.layout.reset();
        continue;
      }
    }
    g.swap(*trial); // Its values are now g's, so the proven layout holds.
    mem.placedThrough = Placed::Allocation;
    if (!attempt.timed)
      if (auto err = reorderWhenSearching(g, ctx))
        return std::move(err);
    notePlacement(ctx, training,
                  !attempt.timed && attempt.distance == 0 && (search || distance > 0));
    return true;
  }
  // Nothing fits: the most offloaded candidate needs the least GPU memory,
  // so allocate's diagnostic on it names the smallest capacity that fits.
  choose(attempts.back().tiers, attempts.back().distance);
  mem.gpuCapacityThatFits = findCapacityThatFits(g, ctx, [&](ir::Graph &trial) -> llvm::Error {
    if (auto placed = applyPlacement(trial, mem); !placed)
      return placed.takeError();
    return runPassesNamed(trial, ctx, {"insert-transfers", "spill", "allocate"});
  });
  return applyPlacement(g, mem);
}

} // namespace zinc::passes
