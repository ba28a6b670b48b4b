//===- PlacementSearch.h - The place pass's policy: which tiers to use ----===//
#ifndef ZINC_PASSES_PLACEMENTSEARCH_H
#define ZINC_PASSES_PLACEMENTSEARCH_H

#include "zinc/passes/Pass.h"

namespace zinc::passes {

/// The place pass: resolves the offload policies of ctx.memory into
/// concrete tiers (optimizerTier, paramsTier) and a prefetch distance, and
/// applies them to `g`. A concrete policy is taken as given. An Auto policy
/// tries the tiers it allows, cheapest predicted transfers first (GPU, then
/// CPU, then NVMe; optimizer before parameters), each with the requested
/// prefetch distance and then with prefetches issued just before their use,
/// and keeps the first that fits every tier: each try runs insert-transfers,
/// spill and allocate on a deep copy of `g` (Graph::clone), and the copy
/// that fits replaces `g`. With one placement, the two distances share
/// their copies: they are made once on `g`, and the fallback sinks the
/// prefetches (a copy is needed only to try spilling). When nothing fits,
/// the most offloaded candidate is kept: the pipeline then fails in
/// allocate, whose diagnostic names the smallest capacity that would fit.
/// ctx.note hears the choice; ctx.memory.placedThrough says how far the
/// later passes' work is done.
llvm::Expected<bool> choosePlacement(ir::Graph &g, PassContext &ctx);

/// Gives every persistent tensor its home in the tiers ctx.memory names, and
/// the optimizer updates of offloaded states the host stream.
llvm::Expected<bool> applyPlacement(ir::Graph &g, const MemoryOptions &mem);

} // namespace zinc::passes

#endif
