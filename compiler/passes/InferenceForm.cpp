//===- InferenceForm.cpp - inference-form: training-mode ops run as inference //
//
// A model exported in training mode (torch.onnx.TrainingMode.TRAINING) keeps
// its BatchNormalization nodes in training form. --mode=infer runs them as
// inference does: normalised with the running statistics (training_mode
// dropped, the existing inference kernel), the running statistics left as
// they are. An updated-running-stat output a node still reads becomes a copy
// of the unchanged statistic; one that is a graph output asks for the
// training computation, which --mode=infer does not run: refused.
//
//===----------------------------------------------------------------------===//
#include "zinc/passes/Pass.h"
#include "zinc/support/Error.h"
#include "llvm/ADT/DenseSet.h"

namespace zinc::passes {
namespace {

class InferenceForm : public Pass {
public:
  llvm::StringRef getName() const override { return "Inference Form"; }
  llvm::StringRef getArgument() const override { return "inference-form"; }
  bool isEnabled(const PassContext &ctx) const override {
    return ctx.training.mode == CompileMode::Infer;
  }
  llvm::Expected<bool> run(ir::Graph &g, PassContext &ctx) override;
};

/// `attrs` without the attributes that only training mode reads.
AttributeList withoutTrainingAttrs(const AttributeList &attrs) {
  AttributeList kept;
  for (const Attribute &a : attrs.all())
    if (a.name != "training_mode" && a.name != "momentum")
      kept.set(a);
  return kept;
}

llvm::Expected<bool> InferenceForm::run(ir::Graph &g, PassContext &) {
  bool changed = false;
  // A snapshot: the loop inserts Identity nodes behind the one it rewrites.
  std::vector<ir::Node *> nodes(g.nodes().begin(), g.nodes().end());
  for (ir::Node *n : nodes) {
    if (!n->domain.empty() || n->opType != "BatchNormalization" ||
        n->attrs.getInt("training_mode", 0) == 0)
      continue;
    for (unsigned i = 1; i < n->outputs.size(); ++i)
      if (n->outputs[i] && g.isOutput(n->outputs[i]))
        return makeError(
            n->describe() +
            ": unsupported with --mode=infer: training-mode "
            "BatchNormalization whose updated running statistic '" +
            n->outputs[i]->name +
            "' is a graph output (inference normalises with the "
            "running statistics and leaves them unchanged)");
    n->attrs = withoutTrainingAttrs(n->attrs);
    changed = true;
    // Outputs 1 and 2 are the updated running mean and variance (inputs 3
    // and 4); in inference they keep their values.
    ir::Node *next = g.nextNode(n);
    for (unsigned i = 1; i < n->outputs.size(); ++i) {
      ir::Value *out = n->outputs[i];
      n->outputs[i] = nullptr;
      if (!out)
        continue;
      out->def = nullptr;
      if (!out->hasUses() && !g.isOutput(out))
        continue;
      g.insertNode(next, "Identity", g.uniqueNodeName(out->name),
                   {n->inputs[i + 2]}, {out});
    }
    n->outputs.resize(1);
  }
  if (changed)
    g.eraseDeadValues();
  return changed;
}

} // namespace

std::unique_ptr<Pass> createInferenceFormPass() {
  return std::make_unique<InferenceForm>();
}

} // namespace zinc::passes
