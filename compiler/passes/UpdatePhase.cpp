//===- UpdatePhase.cpp - What runs only in an optimizer step's last micro-batch -===//
//
// Two sweeps over the final plan order, each linear in the graph's uses:
// forward, a node is update-only when it is one of the roots or reads a
// value whose last writer so far this step is update-only; backward, a node
// is update-only when everything it writes is a temporary (an activation
// that is neither a graph output nor persistent) and every reader of it is
// update-only. Gradient accumulators are the roots' inputs but written by
// AccumulateGrad every micro-batch, which never becomes update-only: it
// writes a state.
//
//===----------------------------------------------------------------------===//
#include "zinc/passes/UpdatePhase.h"
#include "zinc/passes/OptimizerOps.h"
#include "llvm/ADT/DenseMap.h"

namespace zinc::passes {

/// The nodes that make the update: everything else is update-only only
/// through them.
static bool isUpdateRoot(const ir::Node &n) {
  if (isOptimizerNode(n))
    return true;
  return n.domain == "zinc" &&
         (n.opType == "UpdateLossScale" || n.opType == "SumGradSquares");
}

/// Whether `v` holds nothing across micro-batches: a value computed and
/// consumed within one run of the plan.
static bool isTemporary(const ir::Value &v, const llvm::DenseSet<const ir::Value *> &outputs) {
  return v.role == ir::ValueRole::Activation && !outputs.count(&v);
}

llvm::DenseSet<const ir::Node *> updateOnlyNodes(const ir::Graph &g) {
  llvm::DenseSet<const ir::Node *> marked;
  std::vector<ir::Node *> order(g.nodes().begin(), g.nodes().end());
  // Forward: roots, and readers of what a marked node wrote this step.
  llvm::DenseMap<const ir::Value *, const ir::Node *> lastWriter;
  for (ir::Node *n : order) {
    bool update = isUpdateRoot(*n);
    for (const ir::Value *in : n->inputs)
      if (!update && in)
        if (const ir::Node *w = lastWriter.lookup(in); w && marked.count(w))
          update = true;
    if (update)
      marked.insert(n);
    for (unsigned i = 0; i < n->inputs.size(); ++i)
      if (n->inputs[i] && n->writesInput(i))
        lastWriter[n->inputs[i]] = n;
    for (const ir::Value *out : n->outputs)
      if (out)
        lastWriter[out] = n;
  }
  // Backward: producers of temporaries only marked nodes read.
  llvm::DenseSet<const ir::Value *> outputs(g.outputs().begin(), g.outputs().end());
  auto onlyForUpdates = [&](const ir::Value *v) {
    if (!isTemporary(*v, outputs))
      return false;
    for (const ir::Use &u : v->uses())
      if (!marked.count(u.user))
        return false;
    return true;
  };
  for (ir::Node *n : llvm::reverse(order)) {
    if (marked.count(n))
      continue;
    bool writesSomething = false, allForUpdates = true;
    for (unsigned i = 0; i < n->inputs.size() && allForUpdates; ++i)
      if (n->inputs[i] && n->writesInput(i)) {
        writesSomething = true;
        allForUpdates = onlyForUpdates(n->inputs[i]);
      }
    for (const ir::Value *out : n->outputs)
      if (out && allForUpdates) {
        writesSomething = true;
        allForUpdates = onlyForUpdates(out);
      }
    if (writesSomething && allForUpdates)
      marked.insert(n);
  }
  return marked;
}

} // namespace zinc::passes
