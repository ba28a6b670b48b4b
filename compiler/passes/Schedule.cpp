//===- Schedule.cpp - schedule: a memory-aware order of the nodes ---------===//
//
// Program order decides every live interval, so it decides memory. The
// build order keeps each node where the frontend or a gradient rule made it,
// which can be long before its result is needed (constants of a backward
// rule, shape computations). This pass moves every node whose inputs are
// all available from the start of the step (no inputs, or only graph
// inputs, initializers and state) to just before its first user, so its
// result lives no longer than it must. Nodes that update an operand in
// place (as their op declares) and the relative order of everything else
// stay as they are, which keeps the schedule deterministic and results
// bit-identical.
//
//===----------------------------------------------------------------------===//
#include "zinc/passes/Pass.h"
#include "llvm/ADT/DenseMap.h"

namespace zinc::passes {
namespace {

class Schedule : public Pass {
public:
  llvm::StringRef getName() const override { return "Memory-Aware Schedule"; }
  llvm::StringRef getArgument() const override { return "schedule"; }
  llvm::Expected<bool> run(ir::Graph &g, PassContext &ctx) override;
};

bool availableAtStart(const ir::Value *v) {
  return !v || !v->def;
}

llvm::Expected<bool> Schedule::run(ir::Graph &g, PassContext &) {
  // Users of a movable node are never movable themselves (they read a value
  // it defines), so program positions taken once stay right for every user.
  llvm::DenseMap<const ir::Node *, size_t> position;
  std::vector<ir::Node *> movable;
  for (ir::Node *n : g.nodes()) {
    position[n] = position.size();
    bool hasOutputs = llvm::any_of(n->outputs, [](const ir::Value *o) { return o; });
    if (hasOutputs && !n->effects().updatesInPlace() &&
        llvm::all_of(n->inputs, availableAtStart))
      movable.push_back(n);
  }
  bool changed = false;
  for (ir::Node *n : movable) {
    // The first node that reads any of n's outputs.
    ir::Node *firstUser = nullptr;
    for (const ir::Value *out : n->outputs)
      if (out)
        for (const ir::Use &u : out->uses())
          if (!firstUser || position.lookup(u.user) < position.lookup(firstUser))
            firstUser = u.user;
    if (!firstUser || g.prevNode(firstUser) == n)
      continue;
    g.moveBefore(n, firstUser);
    changed = true;
  }
  return changed;
}

} // namespace

std::unique_ptr<Pass> createSchedulePass() { return std::make_unique<Schedule>(); }

} // namespace zinc::passes
