//===- PlacementSearch.h - place + insert-transfers + allocate, auto too --===//
#ifndef ZINC_PASSES_PLACEMENTSEARCH_H
#define ZINC_PASSES_PLACEMENTSEARCH_H

#include "zinc/passes/PassManager.h"
#include <functional>

namespace zinc {

/// Runs "place,insert-transfers,allocate" on `g` for the policies given.
/// An Auto policy tries the concrete tiers it allows, cheapest predicted
/// transfers first (GPU, then CPU, then NVMe; optimizer before parameters),
/// each on a copy of `g` (and each again with prefetches issued just before
/// their use when the requested distance overflows), and keeps the first
/// plan that fits every tier;
/// `note` is told what was chosen. When nothing fits, the error is the last
/// candidate's: the most offloaded one, which needs the least GPU memory, so
/// its diagnostic names the smallest capacity that would fit.
/// `configure` sets up each pass manager (verification, printing).
llvm::Error placeAndAllocate(
    std::unique_ptr<ir::Graph> &g, passes::PassContext &ctx, OffloadPolicy optimizer,
    OffloadPolicy params,
    const std::function<llvm::Error(passes::PassManager &)> &configure,
    const std::function<void(const llvm::Twine &)> &note);

} // namespace zinc

#endif
