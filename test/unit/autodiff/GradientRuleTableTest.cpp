//===- GradientRuleTableTest.cpp - Every ONNX op says how gradients flow --===//
//
// The gradient rules are Ops.def's Gradient column: an ONNX op zinc runs
// must name a rule, or say that its gradient is zero or that it is not
// differentiable, so a model never meets "no rule" for an op zinc accepts.
//
//===----------------------------------------------------------------------===//
#include "zinc/ops/OpDefinition.h"
#include "zinc/passes/autodiff/GradientRules.h"
#include "gtest/gtest.h"

using namespace zinc;

namespace {

TEST(GradientRuleTable, EveryOnnxOpZincRunsHasAnAnswer) {
  for (const ops::OpDefinition &def : ops::allOps()) {
    if (def.kind != ops::OpKind::Onnx)
      continue;
    const autodiff::GradientRule *rule = autodiff::lookupGradientRule(def.name);
    ASSERT_NE(rule, nullptr) << def.name.str() << " has no Gradient in Ops.def";
    if (rule->kind == autodiff::RuleKind::Rule)
      EXPECT_NE(rule->fn, nullptr) << def.name.str();
  }
}

TEST(GradientRuleTable, KindsAsDeclared) {
  using autodiff::RuleKind;
  EXPECT_EQ(autodiff::lookupGradientRule("MatMul")->kind, RuleKind::Rule);
  EXPECT_EQ(autodiff::lookupGradientRule("Shape")->kind,
            RuleKind::ZeroGradient);
  EXPECT_EQ(autodiff::lookupGradientRule("Mod")->kind,
            RuleKind::NotDifferentiable);
  // The fusions' zinc ops have rules; the gradients' own ops do not.
  EXPECT_EQ(autodiff::lookupGradientRule("Silu")->kind, RuleKind::Rule);
  EXPECT_EQ(autodiff::lookupGradientRule("SiluGrad"), nullptr);
  EXPECT_EQ(autodiff::lookupGradientRule("NoSuchOp"), nullptr);
}

} // namespace
