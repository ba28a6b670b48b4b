//===- ModelStateUpdates.cpp - In-place updates of BatchNorm running stats ===//
//
// A BatchNormalization in training mode reads its running mean and variance
// (model state) and produces their updated values; the training step stores
// those back into the state, so that the next step (and --save-weights)
// sees them. No gradient reaches the state and no optimizer touches it.
//
//===----------------------------------------------------------------------===//
#include "zinc/passes/ModelStateUpdates.h"
#include "zinc/support/Error.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/Twine.h"

namespace zinc {

/// The BatchNormalization nodes in training mode, in program order.
static std::vector<ir::Node *> trainingBatchNorms(const ir::Graph &g) {
  std::vector<ir::Node *> found;
  for (const auto &n : g.nodes())
    if (n->domain.empty() && n->opType == "BatchNormalization" &&
        n->attrs.getInt("training_mode", 0) != 0 && n->inputs.size() >= 5 &&
        n->inputs[3] && n->inputs[4])
      found.push_back(n);
  return found;
}

llvm::Expected<bool> appendModelStateUpdates(ir::Graph &g) {
  std::vector<ir::Node *> batchNorms = trainingBatchNorms(g);
  static const char *const what[] = {"running mean", "running variance"};
  for (const ir::Node *n : batchNorms)
    for (unsigned i = 3; i < 5; ++i)
      if (n->inputs[i]->role != ir::ValueRole::ModelState)
        return makeError(n->describe() +
                         ": unsupported: training-mode "
                         "BatchNormalization whose " +
                         what[i - 3] + " (input " + llvm::Twine(i) + " '" +
                         n->inputs[i]->name +
                         "') is not a float initializer: zinc keeps the "
                         "running statistics as model state updated in place");
  // The node after each, found in one walk (inserting keeps pointers valid).
  llvm::DenseMap<const ir::Node *, ir::Node *> nextOf;
  for (ir::Node *n : g.nodes())
    nextOf[n] = g.nextNode(n);
  for (ir::Node *n : batchNorms) {
    ir::Value *x = n->outputs[0] ? n->outputs[0] : n->inputs[0];
    std::string base = x->name;
    n->outputs.resize(5, nullptr);
    // Outputs 1-2 take the running statistics' type; 3-4 too, so a float64
    // model keeps float64 statistics for its gradient.
    static const char *const suffixes[] = {"", ".running_mean", ".running_var",
                                           ".batch_mean", ".batch_invstd"};
    for (unsigned i = 1; i < 5; ++i) {
      if (n->outputs[i])
        continue;
      const ir::Value *like = n->inputs[i <= 2 ? i + 2 : 3];
      ir::Value *v =
          g.addValue(g.uniqueValueName(base + suffixes[i]), like->dtype,
                     like->shape, ir::ValueRole::Activation);
      v->def = n;
      n->outputs[i] = v;
    }
    ir::Node *next = nextOf.lookup(n);
    for (unsigned i = 1; i <= 2; ++i) {
      ir::Value *state = n->inputs[i + 2];
      g.insertNode(next, "CopyInto", g.uniqueNodeName(state->name + "/update"),
                   {n->outputs[i], state}, {}, {}, "zinc");
    }
  }
  return !batchNorms.empty();
}

} // namespace zinc
