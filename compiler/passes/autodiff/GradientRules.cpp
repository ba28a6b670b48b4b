//===- GradientRules.cpp - Op type to gradient rule, from Ops.def ---------===//
#include "zinc/passes/autodiff/GradientRules.h"
#include "rules/Rules.h"
#include "llvm/ADT/StringMap.h"

namespace zinc::autodiff {

const GradientRule *lookupGradientRule(llvm::StringRef opType) {
  static const llvm::StringMap<GradientRule> table = [] {
    llvm::StringMap<GradientRule> t;
    // Keyed by op type alone: zinc's ops with rules (the fusions' Silu,
    // RmsNorm, ...) are named like no ONNX op.
#define Rule(fn) t[opType] = {RuleKind::Rule, &fn};
#define ZeroGradient t[opType] = {RuleKind::ZeroGradient, nullptr};
#define NotDifferentiable t[opType] = {RuleKind::NotDifferentiable, nullptr};
#define NoGradient
#define ZINC_OP(Op, Types, Backends, Gradient, Flops, Workspace, Fold)         \
  {                                                                            \
    llvm::StringRef opType = #Op;                                              \
    Gradient                                                                   \
  }
#define ZINC_ZOP(Op, Effects, Traits, Backends, Gradient, Flops, Workspace)    \
  {                                                                            \
    llvm::StringRef opType = #Op;                                              \
    Gradient                                                                   \
  }
#include "zinc/ops/Ops.def"
#undef Rule
#undef ZeroGradient
#undef NotDifferentiable
#undef NoGradient
    return t;
  }();
  auto it = table.find(opType);
  return it == table.end() ? nullptr : &it->second;
}

} // namespace zinc::autodiff
