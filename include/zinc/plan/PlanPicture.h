//===- PlanPicture.h - A plan's step as an SVG picture --------------------===//
//
// zinc-dump --format=svg: for each tier, the bytes live over the predicted
// step, stacked by what they hold (parameters, gradients, optimizer states,
// activations, checkpoints and spills, kernel workspace) under the tier's
// proven peak and capacity; below, the streams' timeline (each stream's
// busy intervals). A tensor is live from the start of the first instruction
// that touches it to the end of the last one; persistent tensors (inputs,
// parameters, states) and workspaces all step long.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_PLAN_PLANPICTURE_H
#define ZINC_PLAN_PLANPICTURE_H

#include "zinc/plan/PlanSimulator.h"
#include "llvm/Support/raw_ostream.h"

namespace zinc::plan {

/// What a tensor of the plan holds, for the picture's stacking.
enum class MemoryClass { Parameters, Gradients, OptimizerStates, Activations, Checkpoints, Workspace };
inline constexpr unsigned kNumMemoryClasses = 6;
const char *memoryClassName(MemoryClass c);

/// Writes the picture of `plan` over the timeline `prediction` as SVG.
void writePlanSvg(const Plan &plan, const Prediction &prediction, llvm::raw_ostream &os);

} // namespace zinc::plan

#endif
