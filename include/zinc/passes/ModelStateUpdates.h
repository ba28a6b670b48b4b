//===- ModelStateUpdates.h - In-place updates of BatchNorm running stats --===//
#ifndef ZINC_PASSES_MODELSTATEUPDATES_H
#define ZINC_PASSES_MODELSTATEUPDATES_H

#include "zinc/ir/Graph.h"
#include "llvm/Support/Error.h"

namespace zinc {

/// For each training-mode BatchNormalization of a forward graph: makes sure
/// it has outputs 1 and 2 (the updated running mean and variance, which the
/// kernel computes with PyTorch's unbiased batch variance), adds zinc's
/// outputs 3 and 4 (the batch mean and inverse standard deviation, which its
/// gradient reuses instead of recomputing them), and inserts right after it
/// the in-place stores of the updated statistics into the running-stat
/// model state (zinc.CopyInto, whose effects every later pass knows).
/// Returns whether the graph changed; an error when a running statistic is
/// not model state (a float initializer), since there is nothing to update.
llvm::Expected<bool> appendModelStateUpdates(ir::Graph &g);

} // namespace zinc

#endif
