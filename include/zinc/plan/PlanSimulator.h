//===- PlanSimulator.h - The predicted timeline of a plan's step ----------===//
//
// The cost model and the discrete-event simulation of the step (DESIGN's
// simulate pass), run on the facts of the exact program the runtime
// executes (SimProgram.h: from the emitted plan, or from the lowered graph
// the plan would be emitted from): every stream runs its instructions in plan order, each starting
// when its stream is free and the events it waits on are signalled. What an
// instruction costs:
//   compute   max(FLOPs / the GPU's rate for its type, bytes / HBM) + launch
//   host      the optimizer's parameters / CPU Adam's rate, else bytes / CPU
//             memory bandwidth
//   h2d, d2h  bytes / the host link's share of this rank
//   nvme      bytes / the node's NVMe read or write rate, shared by its ranks
//   collective ring algorithm: (N-1)/N of the whole tensor's bytes over the
//             per-GPU bus bandwidth (within or across nodes) plus N-1 step
//             latencies; an all-reduce is a reduce-scatter and an all-gather
// Rates are per rank (Hardware::*PerRank): all ranks run the same plan at
// once. The lower bound is the busiest stream's busy time; overlap
// efficiency is lower bound / predicted step.
//
// The instruction-count model costs every instruction one microsecond: a
// deterministic timeline for tests of the simulation itself.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_PLAN_PLANSIMULATOR_H
#define ZINC_PLAN_PLANSIMULATOR_H

#include "Plan.pb.h"
#include "zinc/plan/PlanNames.h"
#include "zinc/plan/SimProgram.h"
#include "zinc/support/Hardware.h"
#include "llvm/Support/Error.h"
#include <array>
#include <vector>

namespace zinc::plan {

enum class CostModel { Hardware, InstructionCount };

/// The streams of a plan, in the order of the Stream enum.
inline constexpr unsigned kNumStreams = 6;

/// One instruction's place in the predicted timeline (seconds from the
/// start of the step).
struct PredictedInstruction {
  double start = 0;
  double end = 0;
  /// Bytes the instruction moves (a transfer or collective: the tensor's;
  /// a kernel: its operands') and the FLOPs it performs.
  uint64_t bytes = 0;
  uint64_t flops = 0;
};

struct Prediction {
  /// One optimizer step: with gradient accumulation (Plan.grad_accum), the
  /// early micro-batches' runs (update_only instructions only wait and
  /// signal) and then the last one's, one after another.
  double stepSeconds = 0;
  unsigned microBatches = 1;
  /// A run of an early micro-batch, and of the last one (which updates);
  /// both the step without accumulation.
  double microBatchSeconds = 0;
  double lastMicroBatchSeconds = 0;
  /// The model's forward and backward FLOPs per step (no recomputation, no
  /// update) over the step's seconds times the GPU's peak rate for the
  /// precision most of them run in; 0 with the instruction-count model.
  double modelFlopsUtilization = 0;
  /// max(compute, busiest link): no schedule of this work is faster.
  double lowerBoundSeconds = 0;
  /// Seconds each stream is busy in the step (the same order as the
  /// Stream enum).
  std::array<double, kNumStreams> busySeconds{};
  /// The stream whose busy time is the lower bound.
  Stream bottleneck = STREAM_COMPUTE;
  /// In plan order: the last micro-batch's run.
  std::vector<PredictedInstruction> timeline;

  double overlapEfficiency() const {
    return stepSeconds > 0 ? lowerBoundSeconds / stepSeconds : 1.0;
  }
};

/// Simulates one step of `plan` on `hw` (for InstructionCount, `hw` is not
/// read). Fails on a plan whose events or tensors are out of range.
llvm::Expected<Prediction> simulatePlan(const Plan &plan, const Hardware &hw,
                                        CostModel model = CostModel::Hardware);

/// The same for a program's facts (SimProgram.h), however they were
/// gathered. Fails on a wait for an event nothing before it signals.
llvm::Expected<Prediction> simulate(const SimProgram &program, const Hardware &hw,
                                    CostModel model = CostModel::Hardware);

/// The hardware the plan was compiled for (its `hardware_json`); an error
/// for a plan made before the cost model, which has none.
llvm::Expected<Hardware> planHardware(const Plan &plan);

} // namespace zinc::plan

#endif
