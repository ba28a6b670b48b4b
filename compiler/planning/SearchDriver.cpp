//===- SearchDriver.cpp - The memory planner's one search -----------------===//
//
// Which homes, and how far ahead each prefetch goes: a prefetch issued too
// late stalls compute, one issued too early holds its copy (GPU memory)
// longer and may need spills, and which is right depends on the bytes, the
// links and what else is in flight. So the driver enumerates
// configurations, lowers each (Lowering.h: insert-transfers, spill and
// allocate on a copy, then the cost model's prediction), and keeps the
// fastest predicted step among those the allocator proves. The order of
// enumeration is what keeps it cheap:
//
// - placements, cheapest predicted transfers first (GPU, then CPU, then
//   NVMe; optimizer before parameters); the first that fits is kept;
// - for an offloaded placement, prefetch leads doubling from 1, in two
//   families (timed by their own transfer, or also by the copies queued on
//   their link), with the NVMe link in plan order. Memory grows with the
//   lead, so the first lead that does not fit or does not gain 1% ends a
//   family; a family ends too at a step within 1% of the placement's lower
//   bound, and the other family is not tried once the best step is (the
//   bound is the placement's: its bytes per link and its compute do not
//   depend on when they move). The family timed without the queue issues
//   latest at lead 1 and nears the queued timings as its lead grows, so
//   it is walked only while it is ahead of the best found. The NVMe link
//   with its fetches first (NvmeQueueOrder.h) is then tried from the best
//   configuration, its lead doubling while it gains (from scratch when
//   nothing fit in plan order);
// - then the collectives' bucket sizes from the smallest up, and rounds of
//   moving compute into the chosen plan's predicted waits
//   (HoistIntoStalls.h), each kept when it gains 1%;
// - with --dpu, both arrangements of the delayed updates;
// - when no timed plan fits: prefetches just before their use (the fewest
//   copies alive at once), and when even that overflows, the GPU capacity
//   that would fit, for allocate's diagnostic.
//
//===----------------------------------------------------------------------===//
#include "zinc/planning/SearchDriver.h"
#include "zinc/passes/BucketCollectives.h"
#include "zinc/passes/DoesNotFit.h"
#include "zinc/passes/HoistIntoStalls.h"
#include "zinc/passes/PassManager.h"
#include "zinc/passes/Spill.h"
#include "zinc/plan/PlanNames.h"
#include "zinc/planning/Lowering.h"
#include "zinc/planning/Placement.h"
#include "zinc/support/Error.h"
#include "zinc/support/Size.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/FormatVariadic.h"
#include <cassert>
#include <iterator>
#include <limits>

namespace zinc::planning {
namespace {

constexpr double kLeads[] = {1, 2, 4, 8};
/// A longer lead, a larger bucket or a round of hoisting must shorten the
/// predicted step by this much to be kept.
constexpr double kMinGain = 0.01;
/// What a plan timed without the link's queue must gain over the best one
/// timed with it. On the cpu backend such plans measured well above their
/// predicted step where the queue-aware ones measured close to theirs
/// (bench/README.md, predicted_step.py): the model does not yet see what
/// the later issue costs, so a small predicted gain is not believed.
constexpr double kUnqueuedMinGain = 0.10;
/// Rounds of hoisting compute into predicted waits.
constexpr unsigned kHoistRounds = 3;
/// A wait shorter than this many kernel launches is not worth filling.
constexpr double kMinStallLaunches = 4;

std::vector<ir::Tier> candidateTiers(OffloadPolicy policy) {
  switch (policy) {
  case OffloadPolicy::Auto:
    return {ir::Tier::Gpu, ir::Tier::Cpu, ir::Tier::Nvme};
  case OffloadPolicy::None:
    return {ir::Tier::Gpu};
  case OffloadPolicy::Cpu:
    return {ir::Tier::Cpu};
  case OffloadPolicy::Nvme:
    return {ir::Tier::Nvme};
  }
  return {ir::Tier::Gpu};
}

ir::Tier towardsGpu(ir::Tier t) {
  return t == ir::Tier::Nvme ? ir::Tier::Cpu : ir::Tier::Gpu;
}

/// Whether `n` is a copy insert-transfers made to bring a value nearer the
/// GPU: a prefetch, which the prefetch distance places.
bool isPrefetch(const ir::Node &n) {
  if (n.domain != kZincDomain || n.opType != "Copy" || !n.inputs[0] ||
      !n.outputs[0])
    return false;
  ir::Tier from = n.inputs[0]->tier, to = n.outputs[0]->tier;
  return from != ir::Tier::Gpu && to == towardsGpu(from);
}

/// Moves `copy` just before `user`, and the prefetches it reads just before
/// it: a chain NVMe -> CPU -> GPU ends up right ahead of its first user.
void sinkBefore(ir::Graph &g, ir::Node *copy, ir::Node *user,
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
void sinkPrefetches(ir::Graph &g) {
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

/// The search over one graph: `g` is the scheduled graph, homes not yet
/// placed; `ctx` the compilation's context, which receives the decisions
/// kept (ctx.memory) and the layout allocate proved for `g` (ctx.layout).
class SearchDriver {
public:
  SearchDriver(ir::Graph &g, passes::PassContext &ctx)
      : g(g), ctx(ctx), request(PlanRequest::of(g, ctx)) {}

  llvm::Error run();

private:
  PlanConfig initialConfig(std::pair<ir::Tier, ir::Tier> tiers,
                           unsigned distance) const;
  llvm::Error placeWithLeadSearch(PlanConfig config);
  llvm::Expected<llvm::Optional<Candidate>> placeTimed(ir::Graph &graph,
                                                       PlanConfig config);
  llvm::Expected<llvm::Optional<Candidate>>
  searchOverlap(const ir::Graph &homed, PlanConfig config);
  llvm::Error searchFamilies(const ir::Graph &homed, PlanConfig config,
                             llvm::Optional<Candidate> &best);
  llvm::Expected<llvm::Optional<Candidate>>
  lowerTrial(const ir::Graph &homed, const PlanConfig &config);
  llvm::Expected<bool> keepIfFaster(const ir::Graph &homed,
                                    const PlanConfig &config,
                                    llvm::Optional<Candidate> &best);
  llvm::Error searchFetchesFirst(const ir::Graph &homed,
                                 llvm::Optional<Candidate> &best);
  llvm::Error searchBucketSizes(const ir::Graph &homed,
                                llvm::Optional<Candidate> &best);
  llvm::Expected<size_t> hoistRounds(ir::Graph &current,
                                     const PlanConfig &config,
                                     std::shared_ptr<const TierLayout> &layout,
                                     plan::Prediction &predicted);
  llvm::Error reorderWhenSearching(const PlanConfig &config);
  llvm::Expected<uint64_t> chooseBucketSize(PlanConfig config);
  llvm::Error placeWithFallbackDistance(PlanConfig config);
  llvm::Error placeJustBeforeUse(const PlanConfig &config);
  llvm::Error lowerInPlace(const PlanConfig &config);
  llvm::Expected<uint64_t>
  findCapacityThatFits(const ir::Graph &from, const PlanConfig &config,
                       bool applyHomes, llvm::ArrayRef<llvm::StringRef> passes);
  /// `g` (already lowered as `config` says) is the plan: its decisions and
  /// layout become the compilation's.
  void keep(const PlanConfig &config, std::shared_ptr<const TierLayout> layout);
  void keep(Candidate &candidate);
  void notePlacement(const PlanConfig &config, bool justBeforeUse) const;
  /// --print-search: a configuration lowered, and what came of it.
  void trace(const PlanConfig &config, const llvm::Twine &outcome) const;
  /// `err` unless it is a DoesNotFit, noting one of the GPU (gpuOverflowed).
  llvm::Error skipNoting(llvm::Error err);
  llvm::Error search();
  bool canHoist() const {
    return request.hoistIntoStalls && request.hardware &&
           request.hardware->copyEngines;
  }

  ir::Graph &g;
  passes::PassContext &ctx;
  const PlanRequest request;
  /// Compute nodes the plan kept moved into predicted waits.
  size_t hoisted = 0;
  /// Whether a placement tried, timing aside, overflowed the GPU: when
  /// nothing fits, less GPU demand (zinc-compile's budget retry) may help
  /// even where the diagnostic names another tier.
  bool gpuOverflowed = false;
};

PlanConfig SearchDriver::initialConfig(std::pair<ir::Tier, ir::Tier> tiers,
                                       unsigned distance) const {
  PlanConfig config;
  std::tie(config.optimizerTier, config.paramsTier) = tiers;
  config.prefetchDistance = distance;
  config.bucketBytes = request.bucketBytes.getValueOr(0);
  // What the timed search tries first, and what --dpu-updates fixes.
  config.spreadDelayedUpdates =
      request.delayUpdates &&
      request.delayedUpdates == DelayedUpdatePlacement::Spread;
  return config;
}

llvm::Error SearchDriver::skipNoting(llvm::Error err) {
  llvm::Optional<ir::Tier> tier;
  if (llvm::Error rest = passes::unlessDoesNotFit(std::move(err), &tier))
    return rest;
  gpuOverflowed |= tier == ir::Tier::Gpu;
  return llvm::Error::success();
}

void SearchDriver::keep(const PlanConfig &config,
                        std::shared_ptr<const TierLayout> layout) {
  trace(config, "chosen");
  config.applyTo(ctx.memory);
  ctx.layout = std::move(layout);
}

void SearchDriver::keep(Candidate &candidate) {
  g.swap(
      *candidate.graph); // Its values are now g's, so the proven layout holds.
  keep(candidate.config, std::move(candidate.layout));
  hoisted = candidate.hoisted;
  ctx.predictedLayout = ctx.layout;
  ctx.predictedStepSeconds = candidate.predicted.stepSeconds;
}

/// The cost model's verdict on a lowered configuration, for --print-search:
/// to four decimals, as the search compares steps within 1% of each other.
std::string predictedStep(const plan::Prediction &p) {
  return "predicted step " + plan::secondsText(p.stepSeconds, 4) + " (bound " +
         plan::secondsText(p.lowerBoundSeconds, 4) + ")";
}

void SearchDriver::trace(const PlanConfig &config,
                         const llvm::Twine &outcome) const {
  if (!ctx.instrumentation || !ctx.instrumentation->printSearch)
    return;
  *ctx.instrumentation->diagOS << "search: " << config.describe() << ": "
                               << outcome << "\n";
}

/// Tells the user which placement fits, and how its prefetches were timed.
void SearchDriver::notePlacement(const PlanConfig &config,
                                 bool justBeforeUse) const {
  if (!ctx.note)
    return;
  std::string dpu = !request.delayUpdates ? ""
                    : config.spreadDelayedUpdates
                        ? ", delayed updates spread over the step"
                        : ", delayed updates at the start of the step";
  std::string how =
      justBeforeUse ? ", prefetching just before use"
      : config.prefetchLead > 0
          ? ", prefetching " +
                llvm::formatv("{0:F1}", config.prefetchLead).str() +
                "x each transfer's time ahead" +
                (config.prefetchCountsQueue ? " and its link's queue" : "") +
                (config.nvmeFetchesFirst ? ", fetches from NVMe first" : "") +
                " (the fastest predicted step that fits)"
          : "";
  std::string buckets = config.bucketBytes
                            ? ", collectives in buckets of up to " +
                                  formatSize(config.bucketBytes)
                            : "";
  if (hoisted)
    buckets +=
        ", " + std::to_string(hoisted) + " compute nodes moved into waits";
  if (request.training)
    ctx.note("placement: optimizer states and master weights in " +
             ir::tierName(config.optimizerTier) + ", parameters in " +
             ir::tierName(config.paramsTier) + how + dpu + buckets);
  else
    ctx.note("placement: parameters in " + ir::tierName(config.paramsTier) +
             how);
}

/// `config` lowered on a copy of `homed`. The best so far keeps its
/// lowered graph, so two are held at most: lowering the best again once
/// the search ends cost a whole trial (on a 10^5-node graph a lowered copy
/// is about 300 MiB; the search's peak stays under 1 GiB there).
llvm::Expected<llvm::Optional<Candidate>>
SearchDriver::lowerTrial(const ir::Graph &homed, const PlanConfig &config) {
  auto trial = lowerCandidate(homed, config, ctx);
  if (trial)
    trace(config, *trial ? predictedStep((*trial)->predicted) : "does not fit");
  return trial;
}

/// `config` lowered, and kept as `best` when it fits and shortens the best
/// predicted step by 1%; whether it was kept.
llvm::Expected<bool>
SearchDriver::keepIfFaster(const ir::Graph &homed, const PlanConfig &config,
                           llvm::Optional<Candidate> &best) {
  assert(best && "a configuration is faster than some best one");
  auto trial = lowerTrial(homed, config);
  if (!trial)
    return trial.takeError();
  if (!*trial || !((*trial)->predicted.stepSeconds <
                   best->predicted.stepSeconds * (1 - kMinGain)))
    return false;
  best = std::move(*trial);
  return true;
}

/// Both timing families, each from the shortest lead up, at the queue
/// order `config` says; improves `best` in place.
llvm::Error SearchDriver::searchFamilies(const ir::Graph &homed,
                                         PlanConfig config,
                                         llvm::Optional<Candidate> &best) {
  double bestStep = best ? best->predicted.stepSeconds
                         : std::numeric_limits<double>::infinity();
  for (bool queued : {true, false}) {
    config.prefetchCountsQueue = queued;
    double familyBest = std::numeric_limits<double>::infinity();
    for (double lead : kLeads) {
      config.prefetchLead = lead;
      auto trial = lowerTrial(homed, config);
      if (!trial)
        return trial.takeError();
      if (!*trial)
        break;
      double step = (*trial)->predicted.stepSeconds;
      double lowerBound = (*trial)->predicted.lowerBoundSeconds;
      bool gains = step < familyBest * (1 - kMinGain);
      familyBest = std::min(familyBest, step);
      double needed = best && best->config.prefetchCountsQueue && !queued
                          ? kUnqueuedMinGain
                          : kMinGain;
      bool behindBest = step >= bestStep;
      if (step < bestStep * (1 - needed)) {
        best = std::move(*trial);
        bestStep = step;
      }
      // The bound prunes: no configuration of this placement beats it.
      if (!gains || lowerBound >= (1 - kMinGain) * step)
        break;
      // Timed by its own transfer alone, a prefetch issues later than
      // with its link's queue counted: at lead 1 the latest of all. A
      // longer lead moves this family towards the timings the queued one
      // searched, so behind the best at its latest issue it is not walked
      // further.
      if (!queued && behindBest)
        break;
    }
    if (best && best->predicted.overlapEfficiency() >= 1 - kMinGain)
      break; // Nothing left to gain.
  }
  return llvm::Error::success();
}

/// The NVMe link with its fetches first, from the best configuration found
/// in plan order: the fetch order shifts when each prefetch lands, not how
/// far ahead the timing wants it, so the lead that was best stays the
/// place to start, and a lead search of its own in each family would
/// lower as many candidates again. The lead doubles while that gains; the
/// first trial that does not fit or gain ends the walk.
llvm::Error SearchDriver::searchFetchesFirst(const ir::Graph &homed,
                                             llvm::Optional<Candidate> &best) {
  PlanConfig config = best->config;
  config.nvmeFetchesFirst = true;
  for (double lead = config.prefetchLead; lead <= kLeads[std::size(kLeads) - 1];
       lead *= 2) {
    config.prefetchLead = lead;
    auto kept = keepIfFaster(homed, config, best);
    if (!kept)
      return kept.takeError();
    if (!*kept || best->predicted.overlapEfficiency() >= 1 - kMinGain)
      break; // Slower, or nothing left to gain.
  }
  return llvm::Error::success();
}

/// At the best configuration's lead and queue orders, the collectives'
/// bucket sizes from the smallest up; each kept when it shortens the
/// predicted step by 1%. Larger buckets hold more bytes (gathers run
/// earlier, reductions wait for their last member), so the first that does
/// not fit or does not gain ends the search. (What a bucket saves is more
/// than its latency: a gather moved up to its bucket's first member also
/// starts earlier.)
llvm::Error SearchDriver::searchBucketSizes(const ir::Graph &homed,
                                            llvm::Optional<Candidate> &best) {
  if (request.bucketBytes || !best)
    return llvm::Error::success();
  // One rank has no collectives; a step within 1% of its bound has
  // nothing left to gain.
  if (request.ranks <= 1 || best->predicted.overlapEfficiency() >= 1 - kMinGain)
    return llvm::Error::success();
  PlanConfig config = best->config;
  for (uint64_t bytes :
       passes::bucketSizesToTry(*request.hardware, request.ranks)) {
    config.bucketBytes = bytes;
    auto kept = keepIfFaster(homed, config, best);
    if (!kept)
      return kept.takeError();
    if (!*kept)
      break; // Larger ones would save little more, holding more memory.
  }
  return llvm::Error::success();
}

/// Rounds of hoistIntoStalls on `current` (allocated, `layout` its proven
/// layout, `predicted` its step), each re-allocated and kept when it
/// shortens the step by 1%. Returns the nodes moved.
llvm::Expected<size_t>
SearchDriver::hoistRounds(ir::Graph &current, const PlanConfig &config,
                          std::shared_ptr<const TierLayout> &layout,
                          plan::Prediction &predicted) {
  // Where the compute's own cores copy, a wait filled with compute is a
  // core taken from the copy: the simulation's gain is not there.
  if (!canHoist())
    return 0;
  double minStall = kMinStallLaunches * request.hardware->kernelLaunchSeconds;
  size_t total = 0;
  for (unsigned round = 0; round < kHoistRounds; ++round) {
    // All hoisting can gain is the waits: not worth a trial when small.
    if (passes::predictedComputeWaits(current, predicted.timeline, minStall) <
        kMinGain * predicted.stepSeconds)
      break;
    // Hoisting only moves nodes, and allocate only reads the graph: a round
    // not kept puts the program order back, and `layout` holds again. (No
    // copy of the graph: on 10^5 nodes that is hundreds of MiB.)
    std::vector<ir::Node *> order(current.nodes().begin(),
                                  current.nodes().end());
    size_t moved =
        passes::hoistIntoStalls(current, predicted.timeline, minStall);
    if (!moved)
      break;
    auto putBack = [&] {
      for (ir::Node *n : order)
        current.moveBefore(n, nullptr);
    };
    auto allocated = lowerAndPredict(current, config, ctx, {"allocate"});
    if (!allocated) {
      putBack(); // The graph stays the one `layout` was proven for.
      return allocated.takeError();
    }
    bool kept = *allocated && (*allocated)->predicted.stepSeconds <
                                  predicted.stepSeconds * (1 - kMinGain);
    trace(config, std::to_string(moved) + " compute nodes moved into waits: " +
                      (*allocated ? predictedStep((*allocated)->predicted)
                                  : std::string("does not fit")) +
                      (kept ? ", kept" : ", put back"));
    if (!kept) {
      putBack();
      break;
    }
    layout = std::move((*allocated)->layout);
    predicted = std::move((*allocated)->predicted);
    total += moved;
  }
  return total;
}

/// On `homed` (homes placed as `config` says): the timing search, then the
/// bucket sizes and the rounds of hoisting at its best configuration; or,
/// with a timing given (the evaluation program's), that configuration
/// alone. None when no lead fits.
llvm::Expected<llvm::Optional<Candidate>>
SearchDriver::searchOverlap(const ir::Graph &homed, PlanConfig config) {
  // Leads are searched unbucketed; sizes after.
  config.bucketBytes = request.bucketBytes.getValueOr(0);
  llvm::Optional<Candidate> best;
  if (request.givenTiming) {
    config.prefetchLead = request.givenTiming->prefetchLead;
    config.prefetchCountsQueue = request.givenTiming->prefetchCountsQueue;
    config.nvmeFetchesFirst = request.givenTiming->nvmeFetchesFirst;
    auto given = lowerCandidate(homed, config, ctx);
    if (!given)
      return given.takeError();
    trace(config, *given ? predictedStep((*given)->predicted) : "does not fit");
    return std::move(*given);
  }
  bool nvmeHomes = config.optimizerTier == ir::Tier::Nvme ||
                   config.paramsTier == ir::Tier::Nvme;
  // The NVMe link in plan order, then with its fetches first: that helps a
  // compute-bound step whose fetches wait behind optimizer traffic and
  // hurts one whose CPU tier is full, where the sources it holds longer
  // spill, so the simulation decides.
  config.nvmeFetchesFirst = false;
  if (llvm::Error err = searchFamilies(homed, config, best))
    return std::move(err);
  // No fetches from NVMe: the other order makes the same plans again.
  if (nvmeHomes) {
    if (!best) {
      config.nvmeFetchesFirst = true;
      if (llvm::Error err = searchFamilies(homed, config, best))
        return std::move(err);
    } else if (llvm::Error err = searchFetchesFirst(homed, best)) {
      return std::move(err);
    }
  }
  if (llvm::Error err = searchBucketSizes(homed, best))
    return std::move(err);
  if (best) {
    auto moved =
        hoistRounds(*best->graph, best->config, best->layout, best->predicted);
    if (!moved)
      return moved.takeError();
    best->hoisted = *moved;
  }
  return std::move(best);
}

/// Places `graph`'s homes as `config` says and searches its timing. With
/// --dpu the delayed updates can start the step or be spread over it: both
/// are placed and searched on copies, and the faster predicted step is
/// kept. None when nothing fits; `graph` then has its homes placed (updates
/// at the start, or as --dpu-updates says) and nothing more.
llvm::Expected<llvm::Optional<Candidate>>
SearchDriver::placeTimed(ir::Graph &graph, PlanConfig config) {
  auto placeHomes = [&](ir::Graph &target, const PlanConfig &c) -> llvm::Error {
    MemoryOptions mem = ctx.memory;
    c.applyTo(mem);
    auto placed = applyPlacement(target, mem);
    return placed ? llvm::Error::success() : placed.takeError();
  };
  if (!request.delayUpdates) {
    if (llvm::Error err = placeHomes(graph, config))
      return std::move(err);
    return searchOverlap(graph, config);
  }
  std::vector<bool> arrangements;
  if (request.delayedUpdates != DelayedUpdatePlacement::Spread)
    arrangements.push_back(false);
  if (request.delayedUpdates != DelayedUpdatePlacement::AtStart)
    arrangements.push_back(true);
  llvm::Optional<Candidate> best;
  for (bool spread : arrangements) {
    config.spreadDelayedUpdates = spread;
    std::unique_ptr<ir::Graph> homed = graph.clone();
    if (llvm::Error err = placeHomes(*homed, config))
      return std::move(err);
    auto chosen = searchOverlap(*homed, config);
    if (!chosen)
      return chosen.takeError();
    if (*chosen && (!best || (*chosen)->predicted.stepSeconds <
                                 best->predicted.stepSeconds))
      best = std::move(*chosen);
  }
  if (!best) {
    config.spreadDelayedUpdates = arrangements.front();
    if (llvm::Error err = placeHomes(graph, config))
      return std::move(err);
  }
  return std::move(best);
}

/// With the cost model choosing the schedule: compute of the allocated `g`
/// moves into the waits of its predicted timeline (ZeRO-3's gathers on a
/// plan with nothing to prefetch), when that is proven and faster.
llvm::Error SearchDriver::reorderWhenSearching(const PlanConfig &config) {
  if (!request.searchLead || !canHoist() || !ctx.layout)
    return llvm::Error::success();
  auto predicted = predictStep(g, *ctx.layout, ctx);
  if (!predicted)
    return predicted.takeError();
  std::shared_ptr<const TierLayout> layout = ctx.layout;
  auto moved = hoistRounds(g, config, layout, *predicted);
  if (!moved)
    return moved.takeError();
  ctx.layout = std::move(layout);
  hoisted = *moved;
  ctx.predictedLayout = ctx.layout;
  ctx.predictedStepSeconds = predicted->stepSeconds;
  return llvm::Error::success();
}

/// For a placement whose prefetches are not timed (everything on the GPU):
/// the collectives' bucket size (none, then bucketSizesToTry's from the
/// smallest up) whose plan has the fastest predicted step, each size kept
/// when it gains 1%; the first that does not fit or gain ends the search.
/// `config`'s own size when --bucket-bytes fixed it, or without ranks or a
/// hardware description.
llvm::Expected<uint64_t> SearchDriver::chooseBucketSize(PlanConfig config) {
  if (request.bucketBytes || !request.hardware || request.ranks <= 1)
    return config.bucketBytes;
  std::vector<uint64_t> sizes =
      passes::bucketSizesToTry(*request.hardware, request.ranks);
  if (sizes.empty())
    return config.bucketBytes;
  sizes.insert(sizes.begin(), 0);
  double bestStep = std::numeric_limits<double>::infinity();
  uint64_t chosen = 0;
  for (uint64_t bytes : sizes) {
    config.bucketBytes = bytes;
    std::unique_ptr<ir::Graph> trial = g.clone();
    MemoryOptions mem = ctx.memory;
    config.applyTo(mem);
    if (auto placed = applyPlacement(*trial, mem); !placed)
      return placed.takeError();
    auto lowered = lowerAndPredict(*trial, config, ctx, kMemoryPasses);
    if (!lowered)
      return lowered.takeError();
    trace(config, *lowered ? predictedStep((*lowered)->predicted)
                           : std::string("does not fit"));
    if (!*lowered ||
        !((*lowered)->predicted.stepSeconds < bestStep * (1 - kMinGain)))
      break; // Larger ones would save little more, holding more memory.
    bestStep = (*lowered)->predicted.stepSeconds;
    chosen = bytes;
  }
  return chosen;
}

/// When nothing fits, allocate names the GPU peak the plan reached at the
/// capacity given. Spill relieves only what overflows that capacity, so at
/// a larger one it spills less and the packing can need a little more than
/// the peak named. So the capacity to name is checked: `passes` run on a
/// copy of `from` (its homes placed first when `applyHomes`) at the peak
/// reached, then at the next peak, until one fits. 0 when none does within
/// a few tries.
llvm::Expected<uint64_t>
SearchDriver::findCapacityThatFits(const ir::Graph &from,
                                   const PlanConfig &config, bool applyHomes,
                                   llvm::ArrayRef<llvm::StringRef> passes) {
  passes::PassContext probe = ctx;
  const uint64_t asked = probe.memory.gpuCapacity;
  for (int attempt = 0; attempt < 8; ++attempt) {
    std::unique_ptr<ir::Graph> trial = from.clone();
    if (applyHomes) {
      MemoryOptions mem = probe.memory;
      config.applyTo(mem);
      if (auto placed = applyPlacement(*trial, mem); !placed)
        return placed.takeError();
    }
    auto layout = runMemoryPasses(*trial, config, probe, passes);
    if (layout) {
      uint64_t fits = probe.memory.gpuCapacity;
      return fits == asked ? 0 : fits;
    }
    uint64_t needed = 0;
    llvm::Error rest = llvm::handleErrors(
        layout.takeError(), [&](const passes::DoesNotFit &e) {
          needed = e.tier == ir::Tier::Gpu ? e.needed : 0;
          gpuOverflowed |= e.tier == ir::Tier::Gpu;
        });
    if (rest)
      return std::move(rest);
    if (needed <= probe.memory.gpuCapacity)
      break; // Another tier overflowed.
    probe.memory.gpuCapacity = needed;
  }
  return 0;
}

/// `g` with its copies inserted just before their use (prefetch distance 0,
/// the fewest copies alive at once): spilled and allocated, or, when even
/// that overflows the GPU, allocate's diagnostic with the capacity that
/// would fit.
llvm::Error SearchDriver::placeJustBeforeUse(const PlanConfig &config) {
  // Kept unspilled, for the capacity search should this not fit.
  std::unique_ptr<ir::Graph> unspilled = g.clone();
  auto spilled = runMemoryPasses(g, config, ctx, {"spill"});
  if (!spilled)
    return spilled.takeError();
  auto layout = runMemoryPasses(g, config, ctx, {"allocate"});
  if (layout) {
    keep(config, std::move(*layout));
    notePlacement(config, true);
    return llvm::Error::success();
  }
  if (llvm::Error err = skipNoting(layout.takeError()))
    return err;
  auto capacity =
      findCapacityThatFits(*unspilled, config, false, {"spill", "allocate"});
  if (!capacity)
    return capacity.takeError();
  ctx.memory.gpuCapacityThatFits = *capacity;
  auto named = runMemoryPasses(g, config, ctx, {"allocate"});
  if (!named)
    return named.takeError();
  keep(config, std::move(*named));
  return llvm::Error::success();
}

/// One placement, two prefetch distances (the requested one, then 0): both
/// share the homes and the copies, so they are made once on `g`. When the
/// GPU fits without spilling, nothing needs trying on a copy of the graph.
llvm::Error SearchDriver::placeWithFallbackDistance(PlanConfig config) {
  MemoryOptions mem = ctx.memory;
  config.applyTo(mem);
  if (auto placed = applyPlacement(g, mem); !placed)
    return placed.takeError();
  if (auto transfers = runMemoryPasses(g, config, ctx, {"insert-transfers"});
      !transfers)
    return transfers.takeError();
  if (passes::gpuFitsUnspilled(g, ctx.memory.gpuCapacity)) {
    auto layout = runMemoryPasses(g, config, ctx, {"allocate"});
    if (layout) {
      keep(config, std::move(*layout));
      if (llvm::Error err = reorderWhenSearching(config))
        return err;
      notePlacement(config, config.prefetchDistance == 0);
      return llvm::Error::success();
    }
    if (llvm::Error err = skipNoting(layout.takeError()))
      return err;
  } else {
    // Spilling at this distance may not fit, and spills are not undone:
    // they are tried on a copy.
    std::unique_ptr<ir::Graph> trial = g.clone();
    auto layout = runMemoryPasses(*trial, config, ctx, {"spill", "allocate"});
    if (layout) {
      g.swap(*trial); // Its values are now g's, so the proven layout holds.
      keep(config, std::move(*layout));
      notePlacement(config, config.prefetchDistance == 0);
      return llvm::Error::success();
    }
    if (llvm::Error err = skipNoting(layout.takeError()))
      return err;
  }
  sinkPrefetches(g);
  config.prefetchDistance = 0;
  return placeJustBeforeUse(config);
}

/// One placement, timed prefetches: the lead the simulation prefers among
/// those that fit, else prefetches just before use.
llvm::Error SearchDriver::placeWithLeadSearch(PlanConfig config) {
  // Nothing to prefetch: nothing to time but the collectives' buckets.
  if (!config.offloaded()) {
    auto bytes = chooseBucketSize(config);
    if (!bytes)
      return bytes.takeError();
    config.bucketBytes = *bytes;
    return placeWithFallbackDistance(config);
  }
  auto chosen = placeTimed(g, config);
  if (!chosen)
    return chosen.takeError();
  if (*chosen) {
    keep(**chosen);
    notePlacement((*chosen)->config, false);
    return llvm::Error::success();
  }
  // `g` has its homes: copies just before their use.
  config.prefetchDistance = 0;
  config.prefetchLead = 0;
  config.nvmeFetchesFirst = true;
  if (auto transfers = runMemoryPasses(g, config, ctx, {"insert-transfers"});
      !transfers)
    return transfers.takeError();
  return placeJustBeforeUse(config);
}

/// Applies `config`'s homes to `g` and lowers it in place: the plan, or
/// allocate's diagnostic.
llvm::Error SearchDriver::lowerInPlace(const PlanConfig &config) {
  MemoryOptions mem = ctx.memory;
  config.applyTo(mem);
  if (auto placed = applyPlacement(g, mem); !placed)
    return placed.takeError();
  auto layout = runMemoryPasses(g, config, ctx, kMemoryPasses);
  if (!layout)
    return layout.takeError();
  keep(config, std::move(*layout));
  return llvm::Error::success();
}

llvm::Error SearchDriver::run() {
  llvm::Error err = search();
  if (!gpuOverflowed || !err.isA<passes::DoesNotFit>())
    return err;
  return llvm::handleErrors(std::move(err),
                            [](std::unique_ptr<passes::DoesNotFit> e) {
                              e->lessGpuMayFit = true;
                              return llvm::Error(std::move(e));
                            });
}

llvm::Error SearchDriver::search() {
  ctx.memory.gpuCapacityThatFits = 0;
  ctx.layout.reset();
  std::vector<std::pair<ir::Tier, ir::Tier>> tries;
  for (ir::Tier opt : candidateTiers(request.optimizerOffload))
    for (ir::Tier par : candidateTiers(request.paramsOffload))
      // Parameters never live nearer the GPU than the master weights; a
      // delayed update runs on the host, so an automatic choice leaves
      // the GPU out (asked for explicitly, applyPlacement says why not).
      if (!request.training || opt != ir::Tier::Gpu ||
          (par == ir::Tier::Gpu &&
           !(request.delayUpdates &&
             request.optimizerOffload == OffloadPolicy::Auto)))
        tries.push_back({opt, par});
  if (tries.empty())
    return makeError(
        "--offload-params=" +
        ir::tierName(candidateTiers(request.paramsOffload).front()) +
        " needs the optimizer off the GPU too (--offload-optimizer=cpu or "
        "nvme): its fp32 master weights would otherwise stay in GPU memory");
  const unsigned distance = request.prefetchDistance;
  if (tries.size() == 1) {
    PlanConfig config = initialConfig(tries.front(), distance);
    if (request.searchLead)
      return placeWithLeadSearch(config);
    if (distance == 0)
      return lowerInPlace(config);
    return placeWithFallbackDistance(config);
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
    bool timed = request.searchLead && (tiers.first != ir::Tier::Gpu ||
                                        tiers.second != ir::Tier::Gpu);
    attempts.push_back({tiers, timed ? 0 : distance, timed});
    if (timed || distance > 0)
      attempts.push_back({tiers, 0, false});
  }
  for (const Attempt &attempt : attempts) {
    PlanConfig config = initialConfig(attempt.tiers, attempt.distance);
    std::unique_ptr<ir::Graph> trial = g.clone();
    if (attempt.timed) {
      auto chosen = placeTimed(*trial, config);
      if (!chosen)
        return chosen.takeError();
      if (!*chosen)
        continue;
      keep(**chosen);
      notePlacement((*chosen)->config, false);
      return llvm::Error::success();
    }
    if (request.searchLead) {
      auto bytes = chooseBucketSize(config);
      if (!bytes)
        return bytes.takeError();
      config.bucketBytes = *bytes;
    }
    MemoryOptions mem = ctx.memory;
    config.applyTo(mem);
    if (auto placed = applyPlacement(*trial, mem); !placed)
      return placed.takeError();
    auto layout = runMemoryPasses(*trial, config, ctx, kMemoryPasses);
    if (!layout) {
      if (llvm::Error err = skipNoting(layout.takeError()))
        return err;
      continue;
    }
    g.swap(*trial); // Its values are now g's, so the proven layout holds.
    keep(config, std::move(*layout));
    if (llvm::Error err = reorderWhenSearching(config))
      return err;
    notePlacement(config, attempt.distance == 0 &&
                              (request.searchLead || distance > 0));
    return llvm::Error::success();
  }
  // Nothing fits: the most offloaded candidate needs the least GPU memory,
  // so allocate's diagnostic on it names the smallest capacity that fits.
  PlanConfig last =
      initialConfig(attempts.back().tiers, attempts.back().distance);
  auto capacity = findCapacityThatFits(g, last, true, kMemoryPasses);
  if (!capacity)
    return capacity.takeError();
  ctx.memory.gpuCapacityThatFits = *capacity;
  return lowerInPlace(last);
}

} // namespace

llvm::Error planMemory(ir::Graph &g, passes::PassContext &ctx) {
  return SearchDriver(g, ctx).run();
}

} // namespace zinc::planning
