//===- RuleChecks.h - Shared by the activation/shape/data-movement tests --===//
//
// checkWeighted: the finite-difference check of `y` under the loss
// sum(y * c_w), with a frozen random weight c_w, so every output element's
// gradient differs and a rule that mixes up elements fails. Initializers
// whose names start with c_ are constants of the loss.
// buildTrainingText: build-training on an IR text graph, for what no ONNX
// model the frontend imports can reach (ops newer than onnx 1.12, operands
// shape inference cannot see through).
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_TEST_UNIT_AUTODIFF_RULECHECKS_H
#define ZINC_TEST_UNIT_AUTODIFF_RULECHECKS_H

#include "GradCheck.h"
#include "zinc/ir/Parser.h"
#include "zinc/ir/Printer.h"
#include "zinc/passes/PassManager.h"
#include "llvm/Support/raw_ostream.h"

namespace zinc::test {

struct WeightedCase {
  /// Random float64 initializers: the parameters (and c_ constants).
  std::vector<ParamSpec> params;
  /// Graph body defining `y`.
  std::string body;
  std::vector<int64_t> outShape;
  int opset = 17;
  /// Extra initializers in ONNX text (integer constants, exact values).
  std::string extraInits = "";
  double step = 1e-6;
  double tolerance = 1e-6;
  std::string pipeline = "build-training";
  std::vector<std::string> expectOps = {};
};

inline void checkWeighted(const WeightedCase &c) {
  std::vector<ParamSpec> all = c.params;
  all.push_back({"c_w", c.outShape});
  std::string inits = randomInitializers(all);
  if (!c.extraInits.empty())
    inits += ", " + c.extraInits;
  std::string text =
      gradCheckModel(inits,
                     c.body + "\n  weighted = Mul(y, c_w)\n  loss = "
                              "ReduceSum<keepdims=0>(weighted)",
                     c.opset);
  GradCheckOptions opts;
  opts.freeze = "^c_";
  opts.step = c.step;
  opts.tolerance = c.tolerance;
  opts.opset = c.opset;
  opts.pipeline = c.pipeline;
  opts.expectOps = c.expectOps;
  expectGradientsMatch(text, opts);
}

/// Runs build-training (no optimizer) on an IR text graph: the printed
/// result, or the error's message.
inline std::string buildTrainingText(llvm::StringRef text) {
  auto g = ir::parseGraph(text, "t.zir");
  if (!g)
    return "parse: " + llvm::toString(g.takeError());
  passes::PassContext ctx;
  ctx.training.optimizer = OptimizerKind::None;
  passes::PassManager pm(ctx);
  if (auto err = pm.parsePipeline("build-training"))
    return "pipeline: " + llvm::toString(std::move(err));
  if (auto err = pm.run(**g))
    return llvm::toString(std::move(err));
  std::string out;
  llvm::raw_string_ostream os(out);
  ir::printGraph(**g, os);
  return os.str();
}

} // namespace zinc::test

#endif
