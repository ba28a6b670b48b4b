//===- DropoutGradTest.cpp - Training-mode Dropout's gradient -------------===//
//
// Every run of a gradient check is step 1 under seed 0, so the Philox mask
// is the same in the loss evaluations of the finite differences and in the
// backward: the check holds the mask fixed, as a finite-difference check of
// dropout must.
//
//===----------------------------------------------------------------------===//
#include "RuleChecks.h"
#include <gtest/gtest.h>

using namespace zinc::test;

namespace {

const char *trainingConstants = "  r = Constant<value = float {0.5}>()\n"
                                "  on = Constant<value = bool {1}>()\n";

TEST(DropoutGrad, RegeneratedMask) {
  // The mask output is unread, so DropoutGrad regenerates it. b broadcasts
  // over the rows, so its gradient sums masked, scaled elements.
  checkWeighted({{{"a", {4, 5}}, {"b", {5}}},
                 std::string(trainingConstants) +
                     "  s = Add(a, b)\n  y, mask = Dropout(s, r, on)",
                 {4, 5}});
}

TEST(DropoutGrad, StoredMask) {
  // The mask is read by the loss, so it is kept and DropoutGrad reads it.
  checkWeighted({{{"a", {3, 4}}},
                 std::string(trainingConstants) +
                     "  d, mask = Dropout(a, r, on)\n"
                     "  mf = Cast<to = 11>(mask)\n  y = Add(d, mf)",
                 {3, 4}});
}

TEST(DropoutGrad, TrainingFormUsesDropoutGrad) {
  // What the checks above run: the forward draws the mask, the backward
  // regenerates it from the same seed_id (no mask operand).
  std::string out = buildTrainingText(R"(graph "g" opset 17 {
  param %a : f64[4] init "a"
  %r : f32[] = Constant() name "r" {value = [0.5] : tensor<f32[]>}
  %on : bool[] = Constant() name "on" {value = [1] : tensor<bool[]>}
  %y : f64[4], %m : bool[4] = Dropout(%a, %r, %on) name "drop"
  %loss : f64[] = ReduceSum(%y) name "sum" {keepdims = 0 : int}
  output %loss
}
)");
  EXPECT_NE(out.find("%y : f64[4], none = Dropout(%a) name \"drop\" {ratio = "
                     "0.5 : float, seed_id = 0 : int}"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("= zinc.DropoutGrad(%\"sum/grad/Expand_3\") name "
                     "\"drop/grad/DropoutGrad_0\" {ratio = 0.5 : float, "
                     "seed_id = 0 : int}"),
            std::string::npos)
      << out;
}

} // namespace
