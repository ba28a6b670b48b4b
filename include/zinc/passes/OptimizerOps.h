//===- OptimizerOps.h - Recognising the optimizer update nodes ------------===//
#ifndef ZINC_PASSES_OPTIMIZEROPS_H
#define ZINC_PASSES_OPTIMIZEROPS_H

#include "zinc/ir/Graph.h"

namespace zinc {

/// zinc.AdamW / zinc.Adam / zinc.SGD: (param, grad, states..., extras...)
/// updated in place.
inline bool isOptimizerNode(const ir::Node &n) {
  return n.domain == "zinc" &&
         (n.opType == "AdamW" || n.opType == "Adam" || n.opType == "SGD");
}

} // namespace zinc

#endif
