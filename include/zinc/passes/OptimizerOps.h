//===- OptimizerOps.h - Recognising the optimizer update nodes ------------===//
#ifndef ZINC_PASSES_OPTIMIZEROPS_H
#define ZINC_PASSES_OPTIMIZEROPS_H

#include "zinc/ir/Graph.h"
#include "zinc/ops/OpDefinition.h"

namespace zinc {

/// An op with the OptimizerUpdate trait in Ops.def (zinc.AdamW, zinc.Adam,
/// zinc.SGD): (param, grad, states..., extras...) updated in place.
inline bool isOptimizerNode(const ir::Node &n) {
  if (n.domain != kZincDomain)
    return false;
  const ops::OpDefinition *def = ops::lookupOp(n.domain, n.opType);
  return def && def->hasTrait(ops::OptimizerUpdate);
}

/// The extras of an optimizer node follow (param, grad, states), in this
/// order (Ops.def); an absent one is a null operand, or missing at the
/// end.
enum class OptimizerExtra : unsigned {
  ComputeCopy = 0, ///< mixed precision's copy, written with the master
  FoundInf = 1,    ///< fp16 loss scaling: the step's overflow flag,
  LossScale = 2,   ///< the scale,
  AppliedSteps = 3, ///< and the count of updates applied
  GradSumSquares = 4, ///< --clip-grad-norm: the sum of every gradient's squares
};

/// The operand position of `extra` on optimizer node `n`.
inline unsigned optimizerExtraOperand(const ir::Node &n, OptimizerExtra extra) {
  unsigned first = n.opType == "SGD" ? 3 : 4;
  return first + static_cast<unsigned>(extra);
}

} // namespace zinc

#endif
