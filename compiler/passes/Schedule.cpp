//===- Schedule.cpp - schedule: a memory-aware order of the nodes ---------===//
//
// Program order decides every live interval, so it decides memory. The
// build order keeps each node where the frontend or a gradient rule made it,
// which can be long before its result is needed (constants of a backward
// rule, shape computations). This pass moves every node whose inputs are
// all available from the start of the step (no inputs, or only graph
// inputs, initializers and state) to just before its first user, so its
// result lives no longer than it must. Nodes with effects (no outputs) and
// the relative order of everything else stay as they are, which keeps the
// schedule deterministic and results bit-identical.
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
  std::vector<ir::Node *> movable;
  for (const auto &n : g.nodes()) {
    bool hasOutputs = llvm::any_of(n->outputs, [](const ir::Value *o) { return o; });
    if (hasOutputs && llvm::all_of(n->inputs, availableAtStart))
      movable.push_back(n.get());
  }
  bool changed = false;
  for (ir::Node *n : movable) {
    // The first node that reads any of n's outputs.
    ir::Node *firstUser = nullptr;
    bool seenSelf = false, directlyBefore = false;
    ir::Node *prev = nullptr;
    for (const auto &m : g.nodes()) {
      if (m.get() == n) {
        seenSelf = true;
        prev = n;
        continue;
      }
      if (seenSelf && llvm::any_of(m->inputs, [&](const ir::Value *v) {
            return v && v->def == n;
          })) {
        firstUser = m.get();
        directlyBefore = prev == n;
        break;
      }
      prev = m.get();
    }
    if (!firstUser || directlyBefore)
      continue;
    // Re-insert a node identical to n before its first user, then drop n.
    llvm::SmallVector<ir::Value *, 4> ins(n->inputs.begin(), n->inputs.end());
    llvm::SmallVector<ir::Value *, 2> outs(n->outputs.begin(), n->outputs.end());
    std::string name = n->name, op = n->opType, domain = n->domain;
    AttributeList attrs = n->attrs;
    ir::Stream stream = n->stream;
    g.eraseNode(n);
    ir::Node *moved = g.insertNode(firstUser, op, name, ins, outs, std::move(attrs), domain);
    moved->stream = stream;
    changed = true;
  }
  return changed;
}

} // namespace

std::unique_ptr<Pass> createSchedulePass() { return std::make_unique<Schedule>(); }

} // namespace zinc::passes
