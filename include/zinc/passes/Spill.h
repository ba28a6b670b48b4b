//===- Spill.h - What the spill pass tells others -------------------------===//
#ifndef ZINC_PASSES_SPILL_H
#define ZINC_PASSES_SPILL_H

#include "zinc/ir/Graph.h"

namespace zinc::passes {

/// Whether the GPU tier of `g` fits `capacity` bytes (0: unbounded) as it
/// is, so the spill pass would leave it alone. Cheap when every buffer fits
/// side by side; else one packing of the tier.
bool gpuFitsUnspilled(const ir::Graph &g, uint64_t capacity);

} // namespace zinc::passes

#endif
