//===- NvmeQueueOrder.h - Fetches ahead of the NVMe link's other traffic --===//
//
// The NVMe stream serves its copies in plan order, so a parameter fetch the
// GPU waits for can sit behind optimizer traffic that nothing waits for as
// urgently: a write-back of updated states, a state read for a host update.
// insert-transfers ends by letting such fetches pass that traffic.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_PASSES_NVMEQUEUEORDER_H
#define ZINC_PASSES_NVMEQUEUEORDER_H

#include "zinc/ir/Graph.h"
#include "zinc/support/Hardware.h"

namespace zinc::passes {

/// Reorders the NVMe stream of `g` (its nodes' order, which is the stream's
/// order) so that each fetch (an NVMe read whose copy is used off the host:
/// by an h2d copy, a collective or compute) goes ahead of the NVMe
/// write-backs and host-bound state reads queued before it, when it does
/// not depend on them, and while the held copy has waited less than `lead`
/// (at least 1) times its own link seconds of predicted compute on `hw`.
/// The passed copies move to just behind the last fetch that passed them;
/// they keep their own order, and they still precede every node that reads
/// what they produce or overwrites what they read. Returns the number of
/// copies moved. O(nodes + uses).
size_t letFetchesPassNvmeTraffic(ir::Graph &g, const Hardware &hw, double lead);

} // namespace zinc::passes

#endif
