//===- SimulationProgram.h - The simulation's facts, from the graph -------===//
//
// The placement search predicts every configuration it lowers. Writing
// the plan for each only to read a few facts back out of it (the plan of a
// 10^5-node graph is hundreds of MiB of messages) cost more than the
// simulation: the facts come from the graph and its layout directly, as
// emitPlan would write them, and the compile checks that the plan it keeps
// is predicted exactly as its search predicted it.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_PASSES_SIMULATIONPROGRAM_H
#define ZINC_PASSES_SIMULATIONPROGRAM_H

#include "zinc/ir/Graph.h"
#include "zinc/passes/TierLayout.h"
#include "zinc/plan/SimProgram.h"

namespace zinc {

/// The facts (plan/SimProgram.h) of the plan emitPlan writes for `g` laid
/// out as `layout`: instruction i is `g`'s node i in program order, with
/// the same events. `gradAccum`: micro-batches per optimizer step (above 1,
/// the update's instructions run in the last alone). Names and ops point
/// into `g`.
plan::SimProgram simulationProgramOf(const ir::Graph &g, const TierLayout &layout,
                                     unsigned gradAccum);

} // namespace zinc

#endif
