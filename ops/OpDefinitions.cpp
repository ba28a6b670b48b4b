//===- OpDefinitions.cpp - The op table, generated from Ops.def -----------===//
#include "zinc/ops/OpDefinition.h"
#include "llvm/ADT/StringMap.h"
#include <deque>
#include <vector>

namespace zinc::ops {

// The workspace functions Ops.def names (ops/KernelWorkspace.cpp).
namespace workspace {
#define Workspace(fn) uint64_t fn(const WorkspaceQuery &);
#define NoWorkspace
#define ZINC_OP(Op, Types, Backends, Gradient, Flops, Ws, Fold) Ws
#define ZINC_ZOP(Op, Effects, Traits, Backends, Gradient, Flops, Ws) Ws
#include "zinc/ops/Ops.def"
#undef Workspace
#undef NoWorkspace
} // namespace workspace

namespace {

class OpTable {
public:
  OpTable() {
#define Workspace(fn) &workspace::fn
#define NoWorkspace nullptr
#define Pure {}, false
#define Writes(...) {__VA_ARGS__}, false
#define WritesAll {}, true
#define ZINC_OP(Op, Types, Backends, Gradient, Flops, Ws, Fold)                \
  add(OpKind::Onnx, "", #Op, dtypes::Types, {}, false, NoTraits, Backends, Ws);
#define ZINC_ZOP(Op, Effects, Traits, Backends, Gradient, Flops, Ws)           \
  add(OpKind::Zinc, kZincDomain, #Op, DTypeSet(), Effects, Traits, Backends,   \
      Ws);
#define ZINC_FOLD_ONLY_OP(Op, Fold)                                            \
  add(OpKind::FoldOnly, "", #Op, DTypeSet(), {}, false, NoTraits, NoKernel,    \
      nullptr);
#include "zinc/ops/Ops.def"
#undef Workspace
#undef NoWorkspace
#undef Pure
#undef Writes
#undef WritesAll
    for (size_t i = 0; i < defs.size(); ++i)
      (defs[i].domain.empty() ? onnx : zinc)[defs[i].name] = i;
  }

  const OpDefinition *find(llvm::StringRef domain, llvm::StringRef name) const {
    const llvm::StringMap<size_t> *index = domain.empty()          ? &onnx
                                           : domain == kZincDomain ? &zinc
                                                                   : nullptr;
    if (!index)
      return nullptr;
    auto it = index->find(name);
    return it == index->end() ? nullptr : &defs[it->second];
  }

  llvm::ArrayRef<OpDefinition> all() const { return defs; }

private:
  void add(OpKind kind, llvm::StringRef domain, llvm::StringRef name,
           DTypeSet types, std::initializer_list<unsigned> writes,
           bool writesAll, unsigned traits, unsigned backends,
           WorkspaceFn workspace) {
    auto &stored = positions.emplace_back(writes.begin(), writes.end());
    OpDefinition d;
    d.kind = kind;
    d.domain = domain;
    d.name = name;
    d.types = types;
    d.effects = OpEffects{stored, writesAll};
    d.traits = traits;
    d.backends = backends;
    d.workspace = workspace;
    defs.push_back(d);
  }

  // A deque keeps each definition's written positions where its ArrayRef
  // points.
  std::deque<std::vector<unsigned>> positions;
  std::vector<OpDefinition> defs;
  llvm::StringMap<size_t> onnx, zinc;
};

const OpTable &table() {
  static const OpTable t;
  return t;
}

} // namespace

const OpDefinition *lookupOp(llvm::StringRef domain, llvm::StringRef name) {
  return table().find(domain, name);
}

llvm::ArrayRef<OpDefinition> allOps() { return table().all(); }

} // namespace zinc::ops

namespace zinc {

static const OpEffects kPure{};

const OpEffects *lookupOpEffects(llvm::StringRef domain,
                                 llvm::StringRef opType) {
  if (domain != kZincDomain)
    return &kPure;
  const ops::OpDefinition *d = ops::lookupOp(domain, opType);
  return d ? &d->effects : nullptr;
}

const OpEffects &opEffects(llvm::StringRef domain, llvm::StringRef opType) {
  static const OpEffects unknown{{}, /*writesEveryInput=*/true};
  const OpEffects *e = lookupOpEffects(domain, opType);
  return e ? *e : unknown;
}

bool isTransferOp(llvm::StringRef domain, llvm::StringRef opType) {
  if (domain != kZincDomain)
    return false;
  const ops::OpDefinition *d = ops::lookupOp(domain, opType);
  return d && d->hasTrait(ops::Transfer);
}

} // namespace zinc
