//===- SimProgram.h - What the step's simulation reads of a program -------===//
//
// The simulation (PlanSimulator.h) prices and orders instructions from a
// few facts each: its stream and kind, the bytes it moves and the FLOPs it
// performs, its events, and for the NVMe lane where its bytes lie. A
// SimProgram is those facts and nothing else. zinc-dump and zinc-compile's
// report take them from a plan (simProgramOfPlan); the placement search
// takes them from the lowered graph itself (passes/SimulationProgram.h),
// without writing a plan for each configuration it tries. Both read the
// same cost model, so the search predicts exactly what the plan it keeps
// will be predicted to do.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_PLAN_SIMPROGRAM_H
#define ZINC_PLAN_SIMPROGRAM_H

#include "Plan.pb.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include <cstdint>
#include <vector>

namespace zinc::plan {

/// A tensor's bytes in its tier, where the NVMe lane needs them: which
/// sectors a copy touches.
struct SimBytes {
  Tier tier = TIER_GPU;
  uint64_t offset = 0;
  uint64_t size = 0;
};

/// How the cost model prices an instruction.
enum class SimKind : uint8_t {
  Kernel,
  /// zinc.Copy or zinc.CopyInto on a copy stream (h2d, d2h, nvme).
  Transfer,
  /// zinc.AllGather or zinc.ReduceScatter: one ring pass.
  Collective,
  /// zinc.AllReduce: two.
  AllReduce,
  /// zinc.Adam, zinc.AdamW or zinc.SGD with a parameter to update.
  OptimizerStep,
};

struct SimInstruction {
  /// For diagnostics, and recomputation ("@recompute") in the model FLOPs.
  llvm::StringRef name;
  /// The op, for kernel times measured by op (Hardware::measuredKernelSeconds).
  llvm::StringRef op;
  Stream stream = STREAM_COMPUTE;
  SimKind kind = SimKind::Kernel;
  /// Only the last micro-batch of a step runs it (Plan.proto's update_only).
  bool updateOnly = false;
  // What prices a kernel, gathered for the compute and host streams alone
  // (the copy and collective streams run none).
  /// Computes in 16 bits: its first output, else its first input, is f16
  /// or bf16.
  bool half = false;
  /// isMatrixProductOp(op): the GPU's matrix rates.
  bool matrixProduct = false;
  /// Activation checkpointing's recomputation: not the model's FLOPs.
  bool recompute = false;
  /// A transfer's tensor, a collective's whole tensors (all of a bucket's),
  /// a kernel's operands.
  uint64_t bytes = 0;
  uint64_t flops = 0;
  /// An optimizer step: the elements of the parameter it updates.
  double updatedElements = 0;
  /// Elements of the largest operand (measured kernel times are by size):
  /// compute and host streams alone, as above.
  double largestOperand = 0;
  /// On the NVMe stream: whether it reads the tier (its source is there).
  bool readsTier = false;
  /// An NVMe copy the lane submits straight between the tier and a host
  /// tensor on a sector boundary (O_DIRECT), beside others; `sides` then
  /// indexes its two tensors' bytes in the program's nvmeSides.
  bool directNvme = false;
  /// A direct copy whose tier side is its source: it fills host bytes.
  bool fillsHost = false;
  uint32_t sides = 0;
  /// Events waited on and signalled: [first, first + count) of the
  /// program's waits and signals.
  uint32_t firstWait = 0, numWaits = 0;
  uint32_t firstSignal = 0, numSignals = 0;
};

/// A direct NVMe copy's bytes in the tier and in host memory: kept beside
/// the instructions, which are mostly not such copies (a program of 10^6
/// instructions is held while a trial's simulation runs).
struct NvmeSides {
  SimBytes tierSide, hostSide;
};

struct SimProgram {
  std::vector<SimInstruction> instructions;
  std::vector<NvmeSides> nvmeSides;
  std::vector<uint32_t> waits, signals;
  uint32_t numEvents = 0;
  unsigned ranks = 1;
  /// Micro-batches per optimizer step.
  unsigned gradAccum = 1;

  llvm::ArrayRef<uint32_t> waitsOf(const SimInstruction &i) const {
    return llvm::makeArrayRef(waits).slice(i.firstWait, i.numWaits);
  }
  llvm::ArrayRef<uint32_t> signalsOf(const SimInstruction &i) const {
    return llvm::makeArrayRef(signals).slice(i.firstSignal, i.numSignals);
  }
};

/// The facts of `plan`'s instructions; names and ops point into `plan`.
/// Fails on an instruction on an unknown stream, or naming a tensor or an
/// event the plan does not have.
llvm::Expected<SimProgram> simProgramOfPlan(const Plan &plan);

/// How the cost model prices an op of `domain` on `stream`; `hasInputs`:
/// whether the instruction has any (a copy or an update without one is a
/// kernel). Shared by both builders.
SimKind simKindOf(llvm::StringRef domain, llvm::StringRef op, Stream stream,
                  bool hasInputs);

/// Sets `inst`'s NVMe facts (readsTier, directNvme, fillsHost and, in
/// `program`, both sides' bytes) from its source, input 0, and its
/// destination (CopyInto's input 1, else output 0); null where it has none.
/// `destinationIsSource`: both are one tensor. Its stream and kind must be
/// set.
void setNvmeFacts(SimProgram &program, SimInstruction &inst, const SimBytes *source,
                  const SimBytes *destination, bool destinationIsSource);

/// The sector of the lane's O_DIRECT requests.
inline constexpr uint64_t kSimSector = 4096;

} // namespace zinc::plan

#endif
