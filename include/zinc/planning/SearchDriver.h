//===- SearchDriver.h - The memory planner's one search -------------------===//
#ifndef ZINC_PLANNING_SEARCHDRIVER_H
#define ZINC_PLANNING_SEARCHDRIVER_H

#include "zinc/passes/Pass.h"

namespace zinc::planning {

/// Plans the memory of the scheduled `g` (its persistent tensors' homes
/// not yet placed) for the request in ctx.memory: enumerates
/// configurations (SearchDriver.cpp says in which order, and what prunes
/// them), lowers them, and keeps the fastest predicted step the allocator
/// proves. `g` becomes that plan's graph, ctx.memory holds its decisions and
/// ctx.layout its proven layout; ctx.note hears the choice. When nothing
/// fits, the error is allocate's DoesNotFit on the most offloaded
/// placement, naming a GPU capacity that fits; any other error of a trial
/// stops the search.
llvm::Error planMemory(ir::Graph &g, passes::PassContext &ctx);

} // namespace zinc::planning

#endif
