//===- OptimizerOps.h - Recognising the in-place optimizer update nodes ---===//
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

/// Whether a node writes its input `i` in place. Only nodes without outputs
/// do, and they are taken to write every input except the ones known to be
/// read only: a copy's source and an optimizer's gradient. Erring towards
/// "written" only adds ordering, never a race.
inline bool writesInput(const ir::Node &n, unsigned i) {
  bool hasOutputs = llvm::any_of(n.outputs, [](const ir::Value *o) { return o; });
  if (hasOutputs || i >= n.inputs.size() || !n.inputs[i])
    return false;
  if (n.domain == "zinc" && n.opType == "CopyInto" && i == 0)
    return false;
  if (isOptimizerNode(n) && i == 1)
    return false;
  return true;
}

} // namespace zinc

#endif
