//===- PlanSimulator.cpp - Cost model and discrete-event simulation -------===//
#include "zinc/plan/PlanSimulator.h"
#include "zinc/plan/NvmeWriteBehind.h"
#include "zinc/plan/SimProgram.h"
#include "zinc/support/DType.h"
#include "zinc/support/Error.h"
#include "zinc/support/MatMulGeometry.h"
#include "llvm/ADT/Optional.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include <algorithm>

namespace zinc::plan {

namespace {

/// Prices instructions of one program on one machine.
class CostModelOf {
public:
  CostModelOf(const SimProgram &program, const Hardware &hw)
      : hw(hw), ranks(program.ranks) {}

  double seconds(const SimInstruction &inst, uint64_t moved) const {
    switch (inst.stream) {
    case STREAM_H2D:
      return moved / hw.h2dPerRank(ranks);
    case STREAM_D2H:
      return moved / hw.d2hPerRank(ranks);
    case STREAM_NVME:
      return moved / (inst.readsTier ? hw.nvmeReadPerRank(ranks)
                                     : hw.nvmeWritePerRank(ranks));
    case STREAM_COLLECTIVE:
      if (inst.kind == SimKind::Collective || inst.kind == SimKind::AllReduce)
        return collectiveSeconds(inst, moved);
      return hw.kernelLaunchSeconds + moved / hw.gpuMemBandwidth;
    case STREAM_HOST: {
      if (inst.kind == SimKind::OptimizerStep)
        return inst.updatedElements / hw.cpuAdamPerRank(ranks);
      return moved / hw.cpuMemBandwidthPerRank(ranks);
    }
    case STREAM_COMPUTE:
    default: {
      if (auto measured = hw.measuredKernelSeconds(inst.op, inst.largestOperand))
        return *measured;
      return hw.kernelSeconds(static_cast<double>(inst.flops), static_cast<double>(moved),
                              inst.half, inst.matrixProduct);
    }
    }
  }

  /// A write to the NVMe tier that signals nothing: the lane holds it back
  /// and writes it in a batch (NvmeWriteBehind.h), when it goes straight
  /// between the tier and the host tensor. The runtime's rule also checks
  /// that no other stream can observe the delay; in the plans the compiler
  /// emits every such write-back passes it.
  static bool heldBack(const SimInstruction &inst) {
    return inst.numSignals == 0 && inst.directNvme && !inst.readsTier;
  }
  /// The sectors of `b`, as the lane moves them: from the sector its offset
  /// lies in to the sector boundary after its end. Nullopt for a range that
  /// overflows (a corrupt plan): it conflicts with everything.
  static llvm::Optional<std::pair<uint64_t, uint64_t>> sectors(const SimBytes &b) {
    uint64_t end = b.offset + b.size;
    if (end < b.offset || end > UINT64_MAX - kSimSector)
      return llvm::None;
    return std::pair{b.offset / kSimSector * kSimSector,
                     (end + kSimSector - 1) / kSimSector * kSimSector};
  }
  /// Whether `a` and `b` share a sector of one tier.
  static bool shareSectors(const SimBytes &a, const SimBytes &b) {
    if (a.tier != b.tier)
      return false;
    auto x = sectors(a), y = sectors(b);
    return !x || !y || (x->first < y->second && y->first < x->second);
  }
  double nvmeWriteSeconds(uint64_t moved) const { return moved / hw.nvmeWritePerRank(ranks); }
  /// What a request to an idle tier pays beyond its bytes.
  double nvmeLatency(const SimInstruction &inst) const {
    return inst.readsTier ? hw.nvmeReadLatencySeconds : hw.nvmeWriteLatencySeconds;
  }

private:
  /// A ring over the ranks: each step moves 1/ranks of the bytes and pays
  /// the latency once. A bucket is one collective: one latency per step for
  /// all its tensors (they go as one group).
  double collectiveSeconds(const SimInstruction &inst, uint64_t whole) const {
    if (ranks <= 1)
      return hw.kernelLaunchSeconds;
    bool withinNode = ranks <= hw.gpusPerNode;
    double bandwidth = withinNode ? hw.intraNodeBandwidth : hw.interNodeBandwidth;
    double latency = withinNode ? hw.intraNodeLatency : hw.interNodeLatency;
    double steps = ranks - 1;
    double one = steps / ranks * whole / bandwidth + steps * latency;
    return inst.kind == SimKind::AllReduce ? 2 * one : one;
  }

  const Hardware &hw;
  unsigned ranks;
};

/// One pass over the program. `stolen[i]`, for a compute instruction, is the
/// time other streams' work on the same cores takes from it (empty: none).
/// `earlyMicroBatch`: a micro-batch before an optimizer step's last, in
/// which update_only instructions only wait and signal (Plan.proto).
llvm::Expected<Prediction> simulateOnce(const SimProgram &program, const Hardware &hw,
                                        CostModel model, const std::vector<double> &stolen,
                                        bool earlyMicroBatch) {
  Prediction out;
  const auto &instructions = program.instructions;
  out.timeline.resize(instructions.size());
  CostModelOf costs(program, hw);
  std::array<double, kNumStreams> streamFree{};
  std::vector<double> signalled(program.numEvents, 0.0);
  std::vector<bool> everSignalled(program.numEvents, false);
  // The NVMe lane's held-back writes (NvmeWriteBehind.h), waiting to go out
  // as one batch: at kNvmeWriteBehindBytes, before a lane copy that touches
  // their sectors, and at the step's end. The instruction-count model keeps
  // plan order, for tests of the simulation itself.
  struct HeldWrites {
    std::vector<int> instructions;
    uint64_t bytes = 0;
    double ready = 0; // the last one's waits met
  } held;
  const bool holdWrites = model == CostModel::Hardware;
  // The lane reaches its copies in plan order: none starts before the
  // previous one's waits were met, held back or not.
  double laneReached = 0;
  // Whether a copy starting at `start` finds the tier idle (its latency
  // then shows).
  bool laneUsed = false;
  auto laneIdleAt = [&](double start) { return !laneUsed || start > streamFree[STREAM_NVME]; };
  auto release = [&] {
    if (held.instructions.empty())
      return;
    double start = std::max(streamFree[STREAM_NVME], held.ready);
    double cost = costs.nvmeWriteSeconds(held.bytes);
    if (laneIdleAt(start))
      cost += hw.nvmeWriteLatencySeconds; // a lone burst
    laneUsed = true;
    for (int j : held.instructions) {
      out.timeline[j].start = start;
      out.timeline[j].end = start + cost;
    }
    streamFree[STREAM_NVME] = start + cost;
    out.busySeconds[STREAM_NVME] += cost;
    out.stepSeconds = std::max(out.stepSeconds, start + cost);
    held = HeldWrites{};
  };
  // Whether the lane must write the held batch before `inst`: a copy it
  // runs alone (staged) goes after every held write, before even waiting
  // for its events; a direct one that touches their sectors, or fills host
  // bytes they read, once its events are met (the runtime's rule,
  // nvmeCopiesConflict).
  enum class Follow { No, Alone, Conflict };
  auto mustFollowHeld = [&](const SimInstruction &inst) {
    if (!inst.directNvme)
      return Follow::Alone;
    const NvmeSides &sides = program.nvmeSides[inst.sides];
    bool conflict = llvm::any_of(held.instructions, [&](int j) {
      const NvmeSides &w = program.nvmeSides[instructions[j].sides];
      return CostModelOf::shareSectors(sides.tierSide, w.tierSide) ||
             (inst.fillsHost && CostModelOf::shareSectors(sides.hostSide, w.hostSide));
    });
    return conflict ? Follow::Conflict : Follow::No;
  };
  // Plan order is a valid sequential order (every event is signalled before
  // it is waited on), so one pass in plan order places each instruction at
  // the earliest time its stream and its events allow: exactly what the
  // per-stream executors do.
  for (size_t i = 0; i < instructions.size(); ++i) {
    const SimInstruction &inst = instructions[i];
    unsigned stream = static_cast<unsigned>(inst.stream);
    const bool skipped = earlyMicroBatch && inst.updateOnly;
    bool hold = false;
    Follow follow = Follow::No;
    if (holdWrites && stream == STREAM_NVME && !skipped) {
      if (!held.instructions.empty())
        follow = mustFollowHeld(inst);
      if (follow == Follow::Alone)
        release();
      hold = costs.heldBack(inst);
    }
    // A held-back write waits for its events, not for the lane's earlier
    // copies to finish.
    double arrival = hold ? laneReached : streamFree[stream];
    if (stream == STREAM_NVME)
      arrival = std::max(arrival, laneReached);
    double start = arrival;
    double eventWait = model == CostModel::InstructionCount ? 0 : hw.eventWaitSeconds;
    for (uint32_t e : program.waitsOf(inst)) {
      if (!everSignalled[e])
        return makeError("instruction " + llvm::Twine(i) + " ('" + inst.name +
                         "') waits on event " + llvm::Twine(e) +
                         ", which no instruction before it signals");
      // A stream that reaches the wait before the signal blocks, and pays
      // its wake-up; one that arrives later finds the event set.
      if (signalled[e] > arrival)
        start = std::max(start, signalled[e] + eventWait);
    }
    if (follow == Follow::Conflict) {
      // The lane met this copy's events, then writes the batch and waits
      // for it before submitting the copy.
      held.ready = std::max(held.ready, start);
      release();
      start = std::max(start, streamFree[stream]);
    }
    PredictedInstruction &p = out.timeline[i];
    p.bytes = skipped ? 0 : inst.bytes;
    p.flops = skipped ? 0 : inst.flops;
    if (stream == STREAM_NVME)
      laneReached = start;
    if (hold) {
      // Placed when its batch goes out (release).
      held.instructions.push_back(i);
      held.bytes += p.bytes;
      held.ready = std::max(held.ready, start);
      if (held.bytes >= kNvmeWriteBehindBytes)
        release();
      continue;
    }
    double cost = skipped                                ? 0.0
                  : model == CostModel::InstructionCount ? 1e-6
                                                         : costs.seconds(inst, p.bytes);
    if (!stolen.empty())
      cost += stolen[i];
    // A copy that finds the tier idle pays the device's latency; one queued
    // behind others has it hidden.
    if (model == CostModel::Hardware && stream == STREAM_NVME && !skipped) {
      if (laneIdleAt(start))
        cost += costs.nvmeLatency(inst);
      laneUsed = true;
    }
    p.start = start;
    p.end = start + cost;
    streamFree[stream] = p.end;
    out.busySeconds[stream] += cost;
    for (uint32_t e : program.signalsOf(inst)) {
      signalled[e] = p.end;
      everSignalled[e] = true;
    }
    out.stepSeconds = std::max(out.stepSeconds, p.end);
  }
  release();
  for (unsigned s = 0; s < kNumStreams; ++s)
    if (out.busySeconds[s] > out.lowerBoundSeconds) {
      out.lowerBoundSeconds = out.busySeconds[s];
      out.bottleneck = static_cast<Stream>(s);
    }
  return out;
}

/// Streams whose work runs on the cores compute runs on when the machine
/// has no copy engines (the cpu backend's copy, update and collective
/// threads). The NVMe lane mostly waits on the device: left out.
bool sharesComputeCores(Stream s) {
  return s == STREAM_H2D || s == STREAM_D2H || s == STREAM_HOST || s == STREAM_COLLECTIVE;
}

/// What each compute instruction loses, in `pred`, to work of the streams
/// that share its cores: compute's team holds every core, so another
/// thread that runs preempts one of the team, and the rest of the team
/// waits for it at the kernel's end. Each such instruction's time is
/// charged to the compute instructions it overlaps, in proportion, and the
/// one it starts in pays the preemption (Hardware::preemptionSeconds).
std::vector<double> stolenFromCompute(const SimProgram &program, const Hardware &hw,
                                      const Prediction &pred) {
  const auto &instructions = program.instructions;
  std::vector<int> compute;
  for (size_t i = 0; i < instructions.size(); ++i)
    if (instructions[i].stream == STREAM_COMPUTE)
      compute.push_back(static_cast<int>(i)); // in time order: one stream runs in plan order
  std::vector<double> stolen(instructions.size(), 0.0);
  for (size_t j = 0; j < instructions.size(); ++j) {
    const PredictedInstruction &other = pred.timeline[j];
    double length = other.end - other.start;
    if (!sharesComputeCores(instructions[j].stream) || length <= 0)
      continue;
    auto first = std::lower_bound(compute.begin(), compute.end(), other.start,
                                  [&](int c, double t) { return pred.timeline[c].end <= t; });
    // The compute instruction it starts in also pays the preemption.
    if (first != compute.end() && pred.timeline[*first].start <= other.start)
      stolen[*first] += hw.preemptionSeconds;
    for (auto c = first; c != compute.end() && pred.timeline[*c].start < other.end; ++c) {
      double overlap = std::min(other.end, pred.timeline[*c].end) -
                       std::max(other.start, pred.timeline[*c].start);
      if (overlap > 0)
        stolen[*c] += overlap;
    }
  }
  return stolen;
}


/// One micro-batch's run of the program: an early one, or the last one,
/// which updates.
llvm::Expected<Prediction> simulateRun(const SimProgram &program, const Hardware &hw,
                                       CostModel model, bool earlyMicroBatch) {
  auto pred = simulateOnce(program, hw, model, {}, earlyMicroBatch);
  if (!pred || model != CostModel::Hardware || hw.copyEngines)
    return pred;
  // Where copies share compute's cores, what compute loses depends on what
  // overlaps it, which depends on how long compute takes: a few rounds
  // from the timeline without sharing settle it.
  for (int round = 0; round < 3; ++round) {
    auto next = simulateOnce(program, hw, model, stolenFromCompute(program, hw, *pred),
                             earlyMicroBatch);
    if (!next)
      return next;
    pred = std::move(next);
  }
  return pred;
}

/// The FLOPs of the model's forward and backward in one run of the
/// program: compute and host kernels, less recomputation (activation
/// checkpointing's "@recompute" nodes) and the update. The share of them
/// in half precision decides which peak utilisation is measured against.
struct ModelFlops {
  double total = 0;
  double half = 0;
};

ModelFlops modelFlops(const SimProgram &program) {
  ModelFlops f;
  for (const SimInstruction &inst : program.instructions) {
    if (inst.updateOnly || inst.flops == 0 || inst.recompute)
      continue;
    if (inst.stream != STREAM_COMPUTE && inst.stream != STREAM_HOST)
      continue;
    f.total += static_cast<double>(inst.flops);
    if (inst.half)
      f.half += static_cast<double>(inst.flops);
  }
  return f;
}

} // namespace

llvm::Expected<Prediction> simulate(const SimProgram &program, const Hardware &hw,
                                    CostModel model) {
  auto last = simulateRun(program, hw, model, /*earlyMicroBatch=*/false);
  if (!last)
    return last;
  const unsigned n = program.gradAccum > 1 ? program.gradAccum : 1;
  last->microBatches = n;
  last->lastMicroBatchSeconds = last->stepSeconds;
  last->microBatchSeconds = last->stepSeconds;
  if (n > 1) {
    auto early = simulateRun(program, hw, model, /*earlyMicroBatch=*/true);
    if (!early)
      return early;
    // The runtime runs the micro-batches one after another, each run
    // joining every stream at its end.
    last->microBatchSeconds = early->stepSeconds;
    last->stepSeconds += (n - 1) * early->stepSeconds;
    for (unsigned s = 0; s < kNumStreams; ++s)
      last->busySeconds[s] += (n - 1) * early->busySeconds[s];
    last->lowerBoundSeconds = 0;
    for (unsigned s = 0; s < kNumStreams; ++s)
      if (last->busySeconds[s] > last->lowerBoundSeconds) {
        last->lowerBoundSeconds = last->busySeconds[s];
        last->bottleneck = static_cast<Stream>(s);
      }
  }
  if (model == CostModel::Hardware && last->stepSeconds > 0) {
    ModelFlops f = modelFlops(program);
    double peak = f.half * 2 > f.total ? hw.gpuFlopsHalf : hw.gpuFlopsFp32;
    if (peak > 0)
      last->modelFlopsUtilization = n * f.total / (last->stepSeconds * peak);
  }
  return last;
}

llvm::Expected<Prediction> simulatePlan(const Plan &plan, const Hardware &hw,
                                        CostModel model) {
  auto program = simProgramOfPlan(plan);
  if (!program)
    return program.takeError();
  return simulate(*program, hw, model);
}

llvm::Expected<Hardware> planHardware(const Plan &plan) {
  if (plan.hardware_json().empty())
    return makeError("the plan holds no hardware description (compiled before the cost "
                     "model): compile it again");
  return parseHardwareJson(plan.hardware_json(), "the plan's hardware description");
}

} // namespace zinc::plan
