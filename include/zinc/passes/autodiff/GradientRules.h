//===- GradientRules.h - The one table of gradient rules, by op type ------===//
#ifndef ZINC_PASSES_AUTODIFF_GRADIENTRULES_H
#define ZINC_PASSES_AUTODIFF_GRADIENTRULES_H

#include "zinc/passes/autodiff/GradientBuilder.h"

namespace zinc::autodiff {

/// "Gradient is zero" and "not differentiable" are different answers: the
/// first ends gradient flow quietly (Shape, comparisons, integer outputs),
/// the second is an error if a gradient is needed through the op.
enum class RuleKind { Rule, ZeroGradient, NotDifferentiable };

using GradientRuleFn = llvm::Error (*)(GradientBuilder &);

struct GradientRule {
  RuleKind kind = RuleKind::Rule;
  GradientRuleFn fn = nullptr;
};

/// The rule an op type's Gradient column in Ops.def names, or null.
const GradientRule *lookupGradientRule(llvm::StringRef opType);

} // namespace zinc::autodiff

#endif
