//===- DeadCodeElimination.cpp - dce: drops what no graph output needs ----===//
//
// A node is live when one of its outputs reaches a graph output, or when it
// updates an operand in place, as its op declares (zinc/ops/OpEffects.h:
// optimizer updates, write-backs). Every other node goes, and then every
// value nothing uses any more (unused initializers included; graph inputs
// stay, they are the model's interface).
//
// An Identity computes nothing either (exporters leave one for every
// Dropout of ratio 0, and each would be a copy): its readers read its input
// instead, unless its output is a graph output or either value is updated
// in place (then the copy keeps the value as it was).
//
//===----------------------------------------------------------------------===//
#include "zinc/passes/Pass.h"
#include "llvm/ADT/DenseSet.h"

namespace zinc::passes {

namespace {

class DeadCodeElimination : public Pass {
public:
  llvm::StringRef getName() const override { return "Dead Code Elimination"; }
  llvm::StringRef getArgument() const override { return "dce"; }
  llvm::Expected<bool> run(ir::Graph &g, PassContext &ctx) override;
};

/// The values some node updates in place, found in one sweep. Asking each
/// value's use list instead would be quadratic on an Identity chain: every
/// forward moves more readers onto the chain's first value.
llvm::DenseSet<const ir::Value *> valuesUpdatedInPlace(const ir::Graph &g) {
  llvm::DenseSet<const ir::Value *> written;
  for (const ir::Node *n : g.nodes())
    for (unsigned i = 0; i < n->inputs.size(); ++i)
      if (n->writesInput(i))
        written.insert(n->inputs[i]);
  return written;
}

/// Points the readers of each Identity's output at its input; the
/// Identities are then dead. Returns whether any was forwarded.
bool forwardIdentities(ir::Graph &g) {
  // Forwarding never moves a writer (an Identity whose output is written
  // stays), so the set stays true while readers move.
  llvm::DenseSet<const ir::Value *> written = valuesUpdatedInPlace(g);
  bool forwarded = false;
  for (ir::Node *n : g.nodes()) {
    if (!n->domain.empty() || n->opType != "Identity" || n->inputs.size() != 1 ||
        !n->inputs[0] || n->outputs.size() != 1 || !n->outputs[0])
      continue;
    ir::Value *in = n->inputs[0], *out = n->outputs[0];
    if (!out->hasUses() || g.isOutput(out) || in->dtype != out->dtype ||
        in->shape != out->shape || written.count(in) || written.count(out))
      continue;
    g.replaceAllUsesWith(out, in);
    forwarded = true;
  }
  return forwarded;
}

llvm::Expected<bool> DeadCodeElimination::run(ir::Graph &g, PassContext &) {
  bool forwarded = forwardIdentities(g);
  llvm::DenseSet<const ir::Value *> live(g.outputs().begin(),
                                         g.outputs().end());
  // Program order is a topological order, so one backward sweep finds
  // every live node.
  std::vector<ir::Node *> dead;
  for (const auto &n : llvm::reverse(g.nodes())) {
    // Live: it updates an operand in place (as its op declares), or a
    // live node or the step's outputs read one of its results.
    bool isLive = n->effects().updatesInPlace() ||
                  llvm::any_of(n->outputs, [&](const ir::Value *v) { return live.count(v); });
    if (!isLive) {
      dead.push_back(n);
      continue;
    }
    for (const ir::Value *v : n->inputs)
      if (v)
        live.insert(v);
  }
  for (ir::Node *n : dead)
    g.eraseNode(n);

  size_t valuesBefore = g.values().size();
  g.eraseDeadValues();
  return forwarded || !dead.empty() || g.values().size() != valuesBefore;
}

} // namespace

std::unique_ptr<Pass> createDeadCodeEliminationPass() {
  return std::make_unique<DeadCodeElimination>();
}

} // namespace zinc::passes
