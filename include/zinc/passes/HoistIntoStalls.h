//===- HoistIntoStalls.h - Independent compute fills the waits ------------===//
//
// Prefetch timing (insert-transfers) starts each transfer early enough for
// the compute before its user to cover it, but where that compute is short
// (a gather of a large weight after small LayerNorm kernels) or the links
// are busy, the compute stream still waits. Often other compute that does
// not depend on the late transfer comes soon after: in backward, a weight's
// gradient (dW = X^T dY) needs no weight, while the input's gradient
// (dX = dY W^T) waits for the weight to be gathered again. Running it first
// fills the wait. The plan's predicted timeline says where compute waits;
// the overlap search keeps a reordered plan only when the allocator proves
// it and the simulation predicts it faster (compiler/planning/SearchDriver.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_PASSES_HOISTINTOSTALLS_H
#define ZINC_PASSES_HOISTINTOSTALLS_H

#include "zinc/ir/Graph.h"
#include "zinc/plan/PlanSimulator.h"

namespace zinc::passes {

/// For each compute node of `g` that the predicted `timeline` (of the plan
/// emitted from `g` as it is: one instruction per node, in order) shows
/// waiting at least `minStallSeconds` for its stream's events, moves ahead
/// of it the compute nodes among the next `window` nodes that:
///   - depend on nothing that stays between it and them (no value they read
///     is defined or written there, and nothing there reads or writes what
///     they update in place), and
///   - read only values predicted complete by the time the wait begins,
///     plus the predicted time of the nodes moved before them;
/// until their predicted time covers the wait. Moved nodes keep their
/// order. Returns the number of nodes moved. O(nodes x window).
/// The seconds compute waits in `timeline` (of `g` as it is), counting
/// waits of at least `minStallSeconds`: all that hoisting can fill, so the
/// search skips it when this is a small part of the step.
double predictedComputeWaits(const ir::Graph &g,
                             llvm::ArrayRef<plan::PredictedInstruction> timeline,
                             double minStallSeconds);

size_t hoistIntoStalls(ir::Graph &g, llvm::ArrayRef<plan::PredictedInstruction> timeline,
                       double minStallSeconds, size_t window = 64);

} // namespace zinc::passes

#endif
