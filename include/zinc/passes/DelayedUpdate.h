//===- DelayedUpdate.h - ZeRO-Offload's delayed parameter update (--dpu) --===//
#ifndef ZINC_PASSES_DELAYEDUPDATE_H
#define ZINC_PASSES_DELAYEDUPDATE_H

#include "zinc/ir/Graph.h"
#include "llvm/Support/Error.h"

namespace zinc::passes {

/// Moves every host optimizer update to the start of the step, applying
/// the gradients the previous step stored (DelayedUpdate.cpp). Runs on a
/// placed graph, before insert-transfers. Errors when an update is not on
/// the host, or when fp16 loss scaling guards it.
llvm::Error delayUpdates(ir::Graph &g);

} // namespace zinc::passes

#endif
