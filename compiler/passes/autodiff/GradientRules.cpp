//===- GradientRules.cpp - Op type to gradient rule, from Rules.def -------===//
#include "zinc/passes/autodiff/GradientRules.h"
#include "rules/Rules.h"
#include "llvm/ADT/StringMap.h"

namespace zinc::autodiff {

const GradientRule *lookupGradientRule(llvm::StringRef opType) {
  static const llvm::StringMap<GradientRule> table = [] {
    llvm::StringMap<GradientRule> t;
#define ZINC_GRADIENT(Op, Fn) t[#Op] = {RuleKind::Rule, &Fn};
#define ZINC_ZERO_GRADIENT(Op) t[#Op] = {RuleKind::ZeroGradient, nullptr};
#define ZINC_NOT_DIFFERENTIABLE(Op) t[#Op] = {RuleKind::NotDifferentiable, nullptr};
#include "rules/Rules.def"
    return t;
  }();
  auto it = table.find(opType);
  return it == table.end() ? nullptr : &it->second;
}

} // namespace zinc::autodiff
