//===- Rules.h - Declarations of the rule functions named in Rules.def ----===//
#ifndef ZINC_PASSES_AUTODIFF_RULES_RULES_H
#define ZINC_PASSES_AUTODIFF_RULES_RULES_H

#include "zinc/passes/autodiff/GradientBuilder.h"

namespace zinc::autodiff {
#define ZINC_GRADIENT(Op, Fn) llvm::Error Fn(GradientBuilder &b);
#include "Rules.def"
} // namespace zinc::autodiff

#endif
