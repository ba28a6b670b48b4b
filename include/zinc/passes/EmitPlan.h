//===- EmitPlan.h - Lowering a scheduled graph to the plan protobuf -------===//
#ifndef ZINC_PASSES_EMITPLAN_H
#define ZINC_PASSES_EMITPLAN_H

#include "zinc/ir/Graph.h"
#include "zinc/passes/TierLayout.h"
#include "zinc/plan/PlanFile.h"

namespace zinc {

struct EmitOptions {
  std::string mode = "infer";
  std::string hw = "cpu";
  /// The description's rates as JSON (hardwareToJson), kept in the plan
  /// for the cost model; empty leaves them out.
  std::string hardwareJson;
  /// --zero-stage, recorded in the plan (the graph carries the ranks).
  unsigned zeroStage = 0;
  /// --grad-accum: micro-batches per optimizer step; above 1 the plan marks
  /// the instructions only the last one runs (UpdatePhase.h).
  unsigned gradAccum = 1;
  /// Tier capacities in bytes; 0 means unbounded.
  uint64_t gpuCapacity = 0;
  uint64_t cpuCapacity = 0;
  uint64_t nvmeCapacity = 0;
  /// The scalar loss value, or null.
  const ir::Value *loss = nullptr;
  /// The layout allocate proved for this very graph (PassContext::layout),
  /// or null to compute it again.
  const TierLayout *layout = nullptr;
};

/// Builds the plan: one tensor per value, one instruction per node in
/// program order, and static arena offsets from live intervals. Fails when
/// the GPU arena's proven peak exceeds its capacity.
llvm::Expected<plan::Plan> emitPlan(const ir::Graph &g, const EmitOptions &opts);


} // namespace zinc

#endif
