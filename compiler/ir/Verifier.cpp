//===- Verifier.cpp - Checks the structural invariants of a Graph ---------===//
#include "zinc/ir/Verifier.h"
#include "zinc/ir/Printer.h"
#include "zinc/support/Error.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

namespace zinc::ir {
namespace {

/// Facts about the graph that several checks need, computed once.
struct GraphFacts {
  explicit GraphFacts(const Graph &g);
  /// Values and nodes the graph owns: a pointer outside these sets must not
  /// be dereferenced (it may belong to another graph, or be gone).
  llvm::DenseSet<const Value *> values;
  llvm::DenseSet<const Node *> nodes;
  llvm::DenseSet<const Value *> inputs;
  /// The nodes that list each value as an output, in program order.
  llvm::DenseMap<const Value *, llvm::SmallVector<const Node *, 1>> definers;
};

GraphFacts::GraphFacts(const Graph &g) {
  for (const auto &v : g.values())
    values.insert(v.get());
  for (const Value *v : g.inputs())
    inputs.insert(v);
  for (const auto &n : g.nodes()) {
    nodes.insert(n);
    for (const Value *v : n->outputs)
      if (v && values.count(v))
        definers[v].push_back(n);
  }
}

llvm::Error fail(const llvm::Twine &msg) {
  return makeError("verifier: " + msg);
}

std::string quoted(const Value &v) {
  return "'" + formatValueName(v.name) + "'";
}

llvm::Error checkValueNames(const Graph &g, const GraphFacts &) {
  llvm::StringSet<> seen;
  for (const auto &v : g.values())
    if (!seen.insert(v->name).second)
      return fail("two values are named " + quoted(*v));
  return llvm::Error::success();
}

llvm::Error checkNodeNames(const Graph &g, const GraphFacts &) {
  // ONNX allows unnamed nodes; only names that exist must be unique, since
  // diagnostics and --print-after dumps refer to nodes by name.
  llvm::StringMap<const Node *> seen;
  for (const auto &n : g.nodes()) {
    if (n->name.empty())
      continue;
    auto [it, inserted] = seen.try_emplace(n->name, n);
    if (!inserted)
      return fail(n->describe() + ": name already used by an earlier " +
                  it->second->describe());
  }
  return llvm::Error::success();
}

bool isInitializerRole(ValueRole r) {
  return r == ValueRole::Parameter || r == ValueRole::Constant;
}

llvm::Error checkRoles(const Graph &g, const GraphFacts &facts) {
  for (const Value *v : g.inputs())
    if (facts.values.count(v) && v->role != ValueRole::Input)
      return fail("graph input " + quoted(*v) + " has role " +
                  roleName(v->role) + ", expected input");
  for (const auto &v : g.values()) {
    // A State may start as a copy of an initializer (mixed precision's
    // compute-precision copy of a parameter); model state starts as one.
    if (v->init && !isInitializerRole(v->role) && v->role != ValueRole::State &&
        v->role != ValueRole::ModelState)
      return fail("value " + quoted(*v) + " has an initializer but role " +
                  roleName(v->role) + ", expected param or const");
    if (!v->init &&
        (isInitializerRole(v->role) || v->role == ValueRole::ModelState))
      return fail("value " + quoted(*v) + " has role " + roleName(v->role) +
                  " but no initializer");
    if (v->isShard()) {
      // One rank's padded share of the flattened tensor (Graph.h).
      int64_t want = shardElements(numElements(v->shardOf), g.ranks);
      if (g.ranks < 2 || v->shape.size() != 1 || v->shape[0] != want ||
          llvm::any_of(v->shardOf, [](int64_t d) { return d < 0; }))
        return fail("value " + quoted(*v) + " of shape " + formatShape(v->shape) +
                    " is not one rank's shard of " + formatShape(v->shardOf) +
                    " over " + llvm::Twine(g.ranks) + " ranks (expected [" +
                    llvm::Twine(want) + "])");
    }
    if (v->init && v->init->isSlice()) {
      // A tile's share: the same shape as the initializer but along the
      // slice axis, and inside it there (a shard holds part of the share).
      const InitializerRef &r = *v->init;
      llvm::ArrayRef<int64_t> shape = v->isShard() ? llvm::ArrayRef<int64_t>(v->shardOf)
                                                   : llvm::ArrayRef<int64_t>(v->shape);
      bool fits = r.wholeShape.size() == shape.size() && r.sliceAxis >= 0 &&
                  r.sliceAxis < static_cast<int64_t>(shape.size()) &&
                  r.sliceBegin >= 0;
      for (size_t d = 0; fits && d < shape.size(); ++d)
        fits = static_cast<int64_t>(d) == r.sliceAxis
                   ? r.sliceBegin + shape[d] <= r.wholeShape[d]
                   : shape[d] == r.wholeShape[d];
      if (!fits)
        return fail("value " + quoted(*v) + " of shape " + formatShape(shape) +
                    " is not a share of initializer '" + r.name + "' " +
                    formatShape(r.wholeShape) + " at " + llvm::Twine(r.sliceBegin) +
                    " on axis " + llvm::Twine(r.sliceAxis));
    }
    if (v->role == ValueRole::Input && !facts.inputs.count(v.get()))
      return fail("value " + quoted(*v) +
                  " has role input but is not a graph input");
  }
  return llvm::Error::success();
}

llvm::Error checkShapes(const Graph &g, const GraphFacts &) {
  for (const auto &v : g.values())
    if (llvm::any_of(v->shape, [](int64_t d) { return d < 0; }))
      return fail("value " + quoted(*v) + " has a dynamic shape " +
                  formatShape(v->shape) + "; every shape must be static");
  return llvm::Error::success();
}

/// Each value has exactly one definition: a graph input, an initializer, or
/// one node output whose `def` points back at that node.
llvm::Error checkSingleDefinition(const Graph &g, const GraphFacts &facts) {
  llvm::DenseSet<const Value *> inputsSeen;
  for (const Value *v : g.inputs()) {
    if (!facts.values.count(v))
      return fail("a graph input is not a value of this graph");
    if (!inputsSeen.insert(v).second)
      return fail("graph input " + quoted(*v) + " is listed twice");
  }
  for (const auto &n : g.nodes()) {
    for (size_t idx = 0; idx < n->outputs.size(); ++idx) {
      const Value *v = n->outputs[idx];
      if (!v)
        continue;
      std::string what = n->describe() + ": output " + std::to_string(idx);
      if (!facts.values.count(v))
        return fail(what + " is not a value of this graph");
      what += " " + quoted(*v);
      if (v->role != ValueRole::Activation)
        return fail(what + " has role " + roleName(v->role) + ", expected act");
      if (facts.inputs.count(v))
        return fail(what + " is also a graph input");
      if (v->init)
        return fail(what + " is also an initializer");
      const auto &defs = facts.definers.find(v)->second;
      if (defs.size() > 1)
        return fail(what + " is defined again by " + defs[1]->describe());
      if (v->def != n)
        return fail(
            what + " does not point back at its node (def is " +
            (v->def && facts.nodes.count(v->def)
                 ? v->def->describe()
                 : std::string(v->def ? "not a node of this graph" : "null")) +
            ")");
    }
  }
  for (const auto &v : g.values())
    if (v->def && !facts.definers.count(v.get()))
      return fail("value " + quoted(*v) +
                  " has a def node that does not output it");
  return llvm::Error::success();
}

/// Program order is execution order: every operand must be a graph input,
/// an initializer, or an output of an earlier node.
llvm::Error checkDefinedBeforeUse(const Graph &g, const GraphFacts &facts) {
  llvm::DenseSet<const Value *> available(facts.inputs.begin(),
                                          facts.inputs.end());
  for (const auto &v : g.values())
    if (v->init || v->role == ValueRole::State)
      available.insert(v.get());
  for (const auto &n : g.nodes()) {
    for (size_t idx = 0; idx < n->inputs.size(); ++idx) {
      const Value *v = n->inputs[idx];
      if (!v || available.count(v))
        continue;
      std::string what = n->describe() + ": input " + std::to_string(idx);
      if (!facts.values.count(v))
        return fail(what + " is not a value of this graph");
      what += " " + quoted(*v);
      if (facts.definers.count(v))
        return fail(what + " is used before it is defined");
      return fail(what + " is never defined");
    }
    for (const Value *v : n->outputs)
      if (v)
        available.insert(v);
  }
  return llvm::Error::success();
}

llvm::Error checkOutputsDefined(const Graph &g, const GraphFacts &facts) {
  for (size_t idx = 0; idx < g.outputs().size(); ++idx) {
    const Value *v = g.outputs()[idx];
    std::string what = "graph output " + std::to_string(idx);
    if (!v)
      return fail(what + " is none");
    if (!facts.values.count(v))
      return fail(what + " is not a value of this graph");
    if (!facts.inputs.count(v) && !v->init && !facts.definers.count(v))
      return fail(what + " " + quoted(*v) + " is never defined");
  }
  return llvm::Error::success();
}

/// Every op has declared effects: ONNX ops are pure, zinc's own must be in
/// Ops.def, or no pass could know what they write.
llvm::Error checkDeclaredOps(const Graph &g, const GraphFacts &) {
  for (const Node *n : g.nodes())
    if (!lookupOpEffects(n->domain, n->opType))
      return fail(n->describe() + ": '" + n->opType +
                  "' is not an op of the zinc domain (none is declared in "
                  "Ops.def under that name)");
  return llvm::Error::success();
}

/// Use lists agree with the operands: each use names a real operand slot
/// reading the value, and each operand slot is used exactly once.
llvm::Error checkUseLists(const Graph &g, const GraphFacts &facts) {
  size_t operands = 0, uses = 0;
  for (const Node *n : g.nodes())
    operands += llvm::count_if(n->inputs, [](const Value *v) { return v; });
  for (const auto &v : g.values())
    for (const Use &u : v->uses()) {
      ++uses;
      if (!facts.nodes.count(u.user) || u.operand >= u.user->inputs.size() ||
          u.user->inputs[u.operand] != v.get())
        return fail("the use list of " + quoted(*v) +
                    " names an operand that does not read it");
    }
  if (uses != operands)
    return fail("the graph's use lists hold " + llvm::Twine(uses) + " uses for " +
                llvm::Twine(operands) + " operands");
  return llvm::Error::success();
}

using Check = llvm::Error (*)(const Graph &, const GraphFacts &);

/// In order: the later checks assume what the earlier ones establish (that
/// every pointer belongs to the graph, that definitions are unique).
const Check checks[] = {
    checkValueNames,     checkNodeNames,        checkRoles,
    checkShapes,         checkSingleDefinition, checkDefinedBeforeUse,
    checkOutputsDefined, checkDeclaredOps,      checkUseLists,
};

} // namespace

llvm::Error verifyGraph(const Graph &g) {
  GraphFacts facts(g);
  for (Check check : checks)
    if (llvm::Error err = check(g, facts))
      return err;
  return llvm::Error::success();
}

} // namespace zinc::ir
