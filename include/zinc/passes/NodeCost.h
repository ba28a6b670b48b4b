//===- NodeCost.h - What a node of the graph costs on a machine -----------===//
//
// The cost model's rates (support/Hardware.h) applied to graph nodes before
// there is a plan, for the passes that schedule by time (insert-transfers'
// prefetch lead): a compute kernel as the simulator prices it, a host
// update at the CPU Adam rate, a copy over its link. The simulator
// (plan/PlanSimulator.h) prices the emitted plan with the same rates.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_PASSES_NODECOST_H
#define ZINC_PASSES_NODECOST_H

#include "zinc/ir/Graph.h"
#include "zinc/support/Hardware.h"

namespace zinc::passes {

/// Seconds one run of `n` takes on its stream, per rank of `ranks`.
double nodeSeconds(const ir::Node &n, const Hardware &hw, unsigned ranks);

/// Seconds `bytes` take from tier `from` to tier `to` (one link apart).
double copySeconds(uint64_t bytes, ir::Tier from, ir::Tier to, const Hardware &hw,
                   unsigned ranks);

} // namespace zinc::passes

#endif
