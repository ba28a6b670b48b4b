//===- ActivationGradTest.cpp - Unary math, activation, Where, Cast vs FD -===//
#include "RuleChecks.h"
#include "gtest/gtest.h"

using namespace zinc::test;

TEST(ActivationGrad, PowBaseAndExponentBroadcast) {
  // Positive bases: the exponent's gradient y*log(a) is defined everywhere.
  checkWeighted({{{"a", {2, 3}, 0.5, 2.0}, {"e", {3}, -1.5, 2.5}},
                 "  y = Pow(a, e)",
                 {2, 3}});
}

TEST(ActivationGrad, PowConstantExponentNegativeBase) {
  // Only the base needs a gradient; negative bases with an integral power.
  checkWeighted({{{"a", {2, 3}}},
                 "  two = Constant<value = double {2.0}>()\n  y = Pow(a, two)",
                 {2, 3}});
}

TEST(ActivationGrad, PowIntegerExponent) {
  checkWeighted(
      {{{"a", {4}}}, "  y = Pow(a, c_k)", {4}, 17, "int64 c_k = {3}"});
}

TEST(ActivationGrad, PowScalarBaseBroadcastExponent) {
  checkWeighted(
      {{{"a", {}, 0.5, 2.0}, {"e", {2, 3}}}, "  y = Pow(a, e)", {2, 3}});
}

TEST(ActivationGrad, Sqrt) {
  checkWeighted({{{"a", {3, 4}, 0.2, 2.0}}, "  y = Sqrt(a)", {3, 4}});
}

TEST(ActivationGrad, Reciprocal) {
  checkWeighted(
      {{{"a", {3, 4}, 0.5, 2.0}}, "  n = Neg(a)\n  y = Reciprocal(n)", {3, 4}});
}

TEST(ActivationGrad, ExpAndLog) {
  checkWeighted({{{"a", {3, 4}}}, "  y = Exp(a)", {3, 4}});
  checkWeighted({{{"a", {3, 4}, 0.2, 3.0}}, "  y = Log(a)", {3, 4}});
}

TEST(ActivationGrad, Erf) {
  checkWeighted({{{"a", {3, 4}, -2.0, 2.0}}, "  y = Erf(a)", {3, 4}});
}

TEST(ActivationGrad, TanhAndSigmoid) {
  checkWeighted({{{"a", {3, 4}, -3.0, 3.0}}, "  y = Tanh(a)", {3, 4}});
  checkWeighted({{{"a", {3, 4}, -3.0, 3.0}}, "  y = Sigmoid(a)", {3, 4}});
}

// Relu at exactly 0 (gradient 0, as PyTorch) has no finite difference to
// compare with; the kernel test checks it (test/unit/kernels).
TEST(ActivationGrad, Relu) {
  checkWeighted({{{"a", {4, 5}}}, "  y = Relu(a)", {4, 5}});
}

TEST(ActivationGrad, LeakyRelu) {
  checkWeighted({{{"a", {4, 5}}}, "  y = LeakyRelu(a)", {4, 5}});
  checkWeighted({{{"a", {4, 5}}}, "  y = LeakyRelu<alpha = 0.3>(a)", {4, 5}});
}

// Clip's gradient is dy strictly between the bounds (PyTorch's hardtanh,
// which nn.ReLU6 exports as); at a bound exactly there is no finite
// difference to compare with, so the kernel test checks that. The values are
// drawn from [-1, 1), so both bounds clip some of them.
TEST(ActivationGrad, ClipConstantBounds) {
  checkWeighted({{{"a", {4, 5}}},
                 "  lo = Constant<value = double {-0.5}>()\n"
                 "  hi = Constant<value = double {0.4}>()\n"
                 "  y = Clip(a, lo, hi)",
                 {4, 5}});
}

TEST(ActivationGrad, ClipOneBoundOmitted) {
  checkWeighted({{{"a", {4, 5}}},
                 "  hi = Constant<value = double {0.3}>()\n"
                 "  y = Clip(a, , hi)",
                 {4, 5}});
  checkWeighted({{{"a", {4, 5}}},
                 "  lo = Constant<value = double {-0.2}>()\n"
                 "  y = Clip(a, lo)",
                 {4, 5}});
  checkWeighted({{{"a", {2, 3}}}, "  y = Clip(a)", {2, 3}});
}

TEST(ActivationGrad, ClipAttributeBoundsBeforeOpset11) {
  checkWeighted(
      {{{"a", {4, 5}}}, "  y = Clip<min = -0.5, max = 0.25>(a)", {4, 5}, 6});
  checkWeighted({{{"a", {4, 5}}}, "  y = Clip<max = 0.25>(a)", {4, 5}, 6});
}

// A bound that is itself trained is refused by name, not given a guess.
TEST(ActivationGrad, ClipTrainedBoundIsRefused) {
  std::string text = buildTrainingText(R"(graph "g" opset 17 {
  param %a : f64[4] init "a"
  param %lo : f64[] init "lo"
  %y : f64[4] = Clip(%a, %lo) name "clip"
  %loss : f64[] = ReduceSum(%y) name "sum" {keepdims = 0 : int}
  output %loss
})");
  EXPECT_NE(
      text.find("unsupported: gradient of Clip with respect to its min input"),
      std::string::npos)
      << text;
}

TEST(ActivationGrad, WhereBroadcastBranches) {
  // cond [2,3,4], x [2,1,4], y [3,1]: each branch is summed back.
  checkWeighted({{{"x", {2, 1, 4}}, {"z", {3, 1}}, {"c_m", {2, 3, 4}}},
                 "  zero = Constant<value = double {0.0}>()\n"
                 "  cond = Greater(c_m, zero)\n"
                 "  y = Where(cond, x, z)",
                 {2, 3, 4}});
}

TEST(ActivationGrad, WhereOneTrainableBranch) {
  checkWeighted({{{"x", {3, 4}}, {"c_m", {3, 4}}, {"c_z", {4}}},
                 "  zero = Constant<value = double {0.0}>()\n"
                 "  cond = Less(c_m, zero)\n"
                 "  y = Where(cond, c_z, x)",
                 {3, 4}});
}

TEST(ActivationGrad, CastFloatToFloat) {
  checkWeighted({{{"a", {3, 4}}}, "  y = Cast<to = 11>(a)", {3, 4}});
  // Through float32 and back: the step must be large next to float32's
  // rounding for the finite difference to mean anything. (Each value is
  // used once: the check reads every "*.grad" tensor as a parameter's.)
  WeightedCase narrow{
      {{"a", {3, 4}}},
      "  f = Cast<to = 1>(a)\n  s = Tanh(f)\n  y = Cast<to = 11>(s)",
      {3, 4}};
  narrow.step = 1e-3;
  narrow.tolerance = 1e-4;
  checkWeighted(narrow);
}

TEST(ActivationGrad, CastThroughIntegerCarriesNothing) {
  // The integer path contributes zero gradient; only the direct Mul counts.
  checkWeighted(
      {{{"a", {3, 4}, 0.1, 0.9}},
       "  s = Mul(a, c_ten)\n  i = Cast<to = 7>(s)\n  back = Cast<to = 11>(i)\n"
       "  y = Add(back, s)",
       {3, 4},
       17,
       "double c_ten = {10.0}"});
}

// CastLike is Cast to like's type; like itself (here a parameter too) gets a
// zero gradient, as no value of it reaches the loss.
TEST(ActivationGrad, CastLike) {
  checkWeighted({{{"a", {3, 4}}, {"b", {2}}},
                 "  c = CastLike(a, b)\n  y = Mul(c, c)",
                 {3, 4}});
  WeightedCase narrow{{{"a", {3, 4}}, {"c_f", {1}}},
                      "  f = CastLike(a, c_f)\n  s = Tanh(f)\n"
                      "  y = CastLike(s, c_w)",
                      {3, 4}};
  narrow.step = 1e-3;
  narrow.tolerance = 1e-4;
  narrow.extraInits = "";
  checkWeighted(narrow);
}

TEST(ActivationGrad, Identity) {
  checkWeighted(
      {{{"a", {2, 3}}}, "  i = Identity(a)\n  y = Mul(i, a)", {2, 3}});
}

TEST(ActivationGrad, DropoutInference) {
  // opset 17: ratio input, bool mask output left unused.
  checkWeighted(
      {{{"a", {2, 3}}},
       "  r = Constant<value = float {0.25}>()\n  y, mask = Dropout(a, r)",
       {2, 3}});
  // opset 11: ratio attribute. (Before opset 10 the mask has the data's
  // type, but onnx's shape inference cannot type it, so no model gets that
  // far.)
  checkWeighted(
      {{{"a", {2, 3}}}, "  y, mask = Dropout<ratio = 0.3>(a)", {2, 3}, 11});
}

static std::string geluGraph(llvm::StringRef approx) {
  return (R"(graph "g" opset 20 {
  param %a : f64[4] init "a"
  %y : f64[4] = Gelu(%a) name "gelu" {approximate = ")" +
          approx + R"(" : string}
  %loss : f64[] = ReduceSum(%y) name "sum" {keepdims = 0 : int}
  output %loss
})")
      .str();
}

// onnx 1.12, which the frontend uses, predates Gelu (opset 20), so no model
// reaches the finite-difference check with one; the kernel is checked
// against a finite difference of the Gelu kernel in test/unit/kernels. Here:
// the rule hands the approximation to the kernel and refuses unknown ones.
TEST(ActivationGrad, GeluEmitsFusedKernelWithApproximation) {
  std::string text = buildTrainingText(geluGraph("tanh"));
  EXPECT_NE(text.find("zinc.GeluGrad(%a, "), std::string::npos) << text;
  EXPECT_NE(text.find("{approximate = \"tanh\" : string}"), std::string::npos)
      << text;
  EXPECT_NE(
      buildTrainingText(geluGraph("fast"))
          .find("unsupported: gradient of Gelu with approximate=\"fast\""),
      std::string::npos);
}

TEST(ActivationGrad, SiluFusedFromSigmoidProduct) {
  // fuse-silu makes these one zinc.Silu (test/lit/passes/fuse-silu.onnxtxt
  // shows it); its gradient is zinc.SiluGrad.
  checkWeighted({{{"a", {3, 4}}},
                 "  k = Constant<value = double {6.0}>()\n"
                 "  x = Mul(a, k)\n"
                 "  s = Sigmoid(x)\n"
                 "  y = Mul(s, x)",
                 {3, 4},
                 17,
                 "",
                 1e-6,
                 1e-6,
                 "fuse-silu,build-training"});
}

TEST(ActivationGrad, SwiGluFusedFromSiluProduct) {
  // fuse-silu then fuse-swiglu make silu(g) * u one zinc.SwiGlu
  // (test/lit/passes/fuse-swiglu.onnxtxt); both operands' gradients come
  // from one zinc.SwiGluGrad.
  checkWeighted({{{"a", {3, 4}}, {"u", {3, 4}}},
                 "  k = Constant<value = double {4.0}>()\n"
                 "  g = Mul(a, k)\n"
                 "  s = Sigmoid(g)\n"
                 "  act = Mul(g, s)\n"
                 "  y = Mul(act, u)",
                 {3, 4},
                 17,
                 "",
                 1e-6,
                 1e-6,
                 "fuse-silu,fuse-swiglu,build-training",
                 {"zinc.SwiGluGrad"}});
}

TEST(ActivationGrad, SwiGluWithOneOperandFrozen) {
  // Only the gate needs a gradient (up is a frozen constant): the rule
  // gives it alone, through SiluGrad.
  checkWeighted({{{"a", {2, 5}}, {"c_u", {2, 5}}},
                 "  k = Constant<value = double {4.0}>()\n"
                 "  g = Mul(a, k)\n"
                 "  s = Sigmoid(g)\n"
                 "  act = Mul(g, s)\n"
                 "  y = Mul(c_u, act)",
                 {2, 5},
                 17,
                 "",
                 1e-6,
                 1e-6,
                 "fuse-silu,fuse-swiglu,build-training",
                 {"zinc.SwiGlu", "zinc.SiluGrad"}});
}
