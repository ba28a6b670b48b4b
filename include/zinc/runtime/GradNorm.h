//===- GradNorm.h - The gradient norm a step's metrics report -------------===//
#ifndef ZINC_RUNTIME_GRADNORM_H
#define ZINC_RUNTIME_GRADNORM_H

#include "zinc/plan/PlanFile.h"
#include <cstdint>

namespace zinc::rt {

/// The tensor holding the sum of every gradient's squares in a plan compiled
/// with --clip-grad-norm (operand 0 of its zinc.SumGradSquares nodes; after
/// the step, every rank's whole sum), or -1 in a plan that does not clip.
/// Its square root is the norm clip_grad_norm_ returns, which `--metrics`
/// reports as "grad_norm".
int64_t gradSumSquaresTensor(const plan::Plan &plan);

} // namespace zinc::rt

#endif
