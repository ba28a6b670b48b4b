//===- DelayedUpdate.h - ZeRO-Offload's delayed parameter update (--dpu) --===//
#ifndef ZINC_PASSES_DELAYEDUPDATE_H
#define ZINC_PASSES_DELAYEDUPDATE_H

#include "zinc/ir/Graph.h"
#include "zinc/passes/MemoryOptions.h"
#include "llvm/Support/Error.h"

namespace zinc::passes {

/// Moves every host optimizer update into the step (all at its start, or
/// spread over its compute: `where` is AtStart or Spread), applying the gradients the previous step
/// stored (DelayedUpdate.cpp). Runs on a placed graph, before
/// insert-transfers. Errors when an update is not on the host.
llvm::Error delayUpdates(ir::Graph &g, DelayedUpdatePlacement where);

} // namespace zinc::passes

#endif
