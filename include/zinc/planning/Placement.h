//===- Placement.h - Giving every persistent tensor its home tier ---------===//
#ifndef ZINC_PLANNING_PLACEMENT_H
#define ZINC_PLANNING_PLACEMENT_H

#include "zinc/ir/Graph.h"
#include "zinc/passes/MemoryOptions.h"
#include "llvm/Support/Error.h"

namespace zinc::planning {

/// Gives every persistent tensor of `g` its home in the tiers `mem` names
/// (optimizerTier, paramsTier), the optimizer updates of offloaded states
/// the host stream, and with --dpu delays the updates as `mem` says.
/// Returns whether `g` changed.
llvm::Expected<bool> applyPlacement(ir::Graph &g, const MemoryOptions &mem);

} // namespace zinc::planning

#endif
