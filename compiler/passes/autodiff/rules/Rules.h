//===- Rules.h - Declarations of the gradient rules Ops.def names ---------===//
#ifndef ZINC_PASSES_AUTODIFF_RULES_RULES_H
#define ZINC_PASSES_AUTODIFF_RULES_RULES_H

#include "zinc/passes/autodiff/GradientBuilder.h"

namespace zinc::autodiff {
#define Rule(fn) llvm::Error fn(GradientBuilder &b);
#define ZeroGradient
#define NotDifferentiable
#define NoGradient
#define ZINC_OP(Op, Types, Backends, Gradient, Flops, Workspace, Fold) Gradient
#define ZINC_ZOP(Op, Effects, Traits, Backends, Gradient, Flops, Workspace)    \
  Gradient
#include "zinc/ops/Ops.def"
#undef Rule
#undef ZeroGradient
#undef NotDifferentiable
#undef NoGradient
} // namespace zinc::autodiff

#endif
