//===- InferenceDropout.cpp - inference-dropout: Dropout is the identity --===//
//
// --mode=infer runs the model as PyTorch's eval() does: every Dropout, even
// one exported in training mode, passes its data through unchanged
// (DropoutLowering.h). build-training makes the training form instead.
//
//===----------------------------------------------------------------------===//
#include "zinc/passes/DropoutLowering.h"
#include "zinc/passes/Pass.h"

namespace zinc::passes {
namespace {

class InferenceDropout : public Pass {
public:
  llvm::StringRef getName() const override { return "Inference Dropout"; }
  llvm::StringRef getArgument() const override { return "inference-dropout"; }
  bool isEnabled(const PassContext &ctx) const override {
    return ctx.training.mode == CompileMode::Infer;
  }
  llvm::Expected<bool> run(ir::Graph &g, PassContext &) override {
    return lowerDropouts(g, /*training=*/false);
  }
};

} // namespace

std::unique_ptr<Pass> createInferenceDropoutPass() {
  return std::make_unique<InferenceDropout>();
}

} // namespace zinc::passes
