//===- UpdatePhase.h - What runs only in an optimizer step's last micro-batch -===//
#ifndef ZINC_PASSES_UPDATEPHASE_H
#define ZINC_PASSES_UPDATEPHASE_H

#include "zinc/ir/Graph.h"
#include "llvm/ADT/DenseSet.h"

namespace zinc::passes {

/// With gradient accumulation the runtime runs a plan once per micro-batch,
/// and the nodes returned here only in an optimizer step's last one
/// (plan::Instruction::update_only): the updates, loss scaling's update and
/// clipping's sums; every node after them in plan order that reads what one
/// of them wrote this step (refreshes of the compute weights, write-backs,
/// ZeRO's gathers of the updated shards, clipping's all-reduce); and every
/// node whose outputs are temporaries only such nodes read (the transfers
/// that stage optimizer states for the updates). Skipping them elsewhere is
/// safe by construction: what they write, nothing else reads before the
/// next step's first micro-batch, or it is a temporary only they read.
llvm::DenseSet<const ir::Node *> updateOnlyNodes(const ir::Graph &g);

} // namespace zinc::passes

#endif
