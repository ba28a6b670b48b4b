//===- DeadCodeElimination.cpp - dce: drops what no graph output needs ----===//
//
// A node is live when one of its outputs reaches a graph output, or when it
// updates an operand in place, as its op declares (zinc/support/OpEffects.h:
// optimizer updates, write-backs). Every other node goes, and then every
// value nothing uses any more (unused initializers included; graph inputs
// stay, they are the model's interface).
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

llvm::Expected<bool> DeadCodeElimination::run(ir::Graph &g, PassContext &) {
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
  return !dead.empty() || g.values().size() != valuesBefore;
}

} // namespace

std::unique_ptr<Pass> createDeadCodeEliminationPass() {
  return std::make_unique<DeadCodeElimination>();
}

} // namespace zinc::passes
