//===- GradCheck.h - Gradient rules against finite differences ------------===//
//
// Compiles a small ONNX-text training graph (float64 initializers are the
// parameters, the only scalar output is the loss) through the frontend and
// build-training with gradients as outputs, runs it on the cpu runtime, and
// compares every gradient element with a central finite difference of the
// loss, also run on the cpu runtime.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_TEST_UNIT_AUTODIFF_GRADCHECK_H
#define ZINC_TEST_UNIT_AUTODIFF_GRADCHECK_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include <string>
#include <vector>

namespace zinc::test {

struct GradCheckOptions {
  double step = 1e-6;
  /// |analytic - numeric| <= tolerance * max(1, |numeric|)
  double tolerance = 1e-6;
  /// Initializers matching this regex are constants of the loss, not
  /// parameters (e.g. "^c_").
  std::string freeze;
  /// Opset of the model header.
  int opset = 17;
  /// The passes run before emitting: the fusions that make the ops whose
  /// gradients a test checks go before build-training.
  std::string pipeline = "build-training";
  /// Ops ("zinc.Rotary") the pipeline must have made: a fusion that did not
  /// fire fails the check instead of passing on the unfused ops' rules.
  std::vector<std::string> expectOps;
};

struct ParamSpec {
  std::string name;
  std::vector<int64_t> shape;
  /// Values are drawn uniformly from [low, high).
  double low = -1.0;
  double high = 1.0;
};

/// ONNX-text initializer declarations `double[2,3] w = {...}, ...` with
/// seeded random values.
std::string randomInitializers(llvm::ArrayRef<ParamSpec> params, unsigned seed = 1);

/// The whole model text: header at `opset`, a graph named "g" with no inputs
/// and the double scalar output `loss`, the given initializers and body.
std::string gradCheckModel(llvm::StringRef initializers, llvm::StringRef body,
                           int opset = 17);

/// Runs the check; failures are reported through GoogleTest (EXPECT_*), one
/// per mismatching element, naming parameter and index.
void expectGradientsMatch(llvm::StringRef modelText, const GradCheckOptions &opts = {});

} // namespace zinc::test

#endif
