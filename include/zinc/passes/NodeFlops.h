//===- NodeFlops.h - Floating-point operations a node performs ------------===//
//
// The work of one node, for choices that weigh compute against memory or
// transfers (activation checkpointing today, the cost model later): a
// product is 2 m n k per matrix, a convolution 2 per multiply-add of its
// im2col GEMM, a loss one operation per element of its scores, anything
// else one operation per output element (Ops.def's FLOPs column).
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_PASSES_NODEFLOPS_H
#define ZINC_PASSES_NODEFLOPS_H

#include "zinc/ir/Graph.h"
#include <cstdint>

namespace zinc::passes {

uint64_t estimateFlops(const ir::Node &n);

/// Whether the node's work is one operation per output element (Ops.def's
/// FLOPs column says OutputElements): a pass over what it makes.
bool flopsPerOutputElement(const ir::Node &n);

} // namespace zinc::passes

#endif
