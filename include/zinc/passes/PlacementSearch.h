//===- PlacementSearch.h - The place pass's policy: which tiers to use ----===//
#ifndef ZINC_PASSES_PLACEMENTSEARCH_H
#define ZINC_PASSES_PLACEMENTSEARCH_H

#include "zinc/passes/Pass.h"

namespace zinc::passes {

/// Resolves the offload policies of ctx.memory into concrete tiers
/// (optimizerTier, paramsTier) and a prefetch distance. A concrete policy is
/// taken as given. An Auto policy tries the tiers it allows, cheapest
/// predicted transfers first (GPU, then CPU, then NVMe; optimizer before
/// parameters), each with the requested prefetch distance and then with
/// prefetches issued just before their use, and keeps the first that fits
/// every tier. Each try runs insert-transfers, spill and allocate on a deep
/// copy of `g` (Graph::clone). When nothing fits, the most offloaded
/// candidate is kept: the pipeline then fails in allocate, whose diagnostic
/// names the smallest capacity that would fit. ctx.note hears the choice.
/// `placed` receives the copy that fit, insert-transfers and spill done,
/// when a search ran and one did (null otherwise): the place pass keeps it
/// rather than doing that work again.
llvm::Error choosePlacement(const ir::Graph &g, PassContext &ctx,
                            std::unique_ptr<ir::Graph> &placed);

/// Gives every persistent tensor its home in the tiers ctx.memory names, and
/// the optimizer updates of offloaded states the host stream.
llvm::Expected<bool> applyPlacement(ir::Graph &g, const MemoryOptions &mem);

} // namespace zinc::passes

#endif
