//===- NodeFlops.h - Floating-point operations a node performs ------------===//
//
// The work of one node, for choices that weigh compute against memory or
// transfers (activation checkpointing today, the cost model later): a
// product is 2 m n k per matrix, a convolution 2 per multiply-add of its
// im2col GEMM, anything else one operation per output element.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_PASSES_NODEFLOPS_H
#define ZINC_PASSES_NODEFLOPS_H

#include "zinc/ir/Graph.h"
#include <cstdint>

namespace zinc::passes {

uint64_t estimateFlops(const ir::Node &n);

} // namespace zinc::passes

#endif
