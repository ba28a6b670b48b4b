//===- ConcatInPlace.cpp - concat-in-place: tiles write their own columns -===//
//
// The tile pass joins a tiled product's pieces with a Concat along the
// output's last axis, a copy of the whole output that also keeps every
// piece live until the last is done. Here each product writes its columns
// of the joined output directly (BLAS's leading dimension):
//   Y_0 = FusedMatMul(X, W_0) ... Y = Concat(Y_0, ..., Y_k)
// becomes
//   Y = FusedMatMul(X, W_0) {outColumn = 0}          (defines Y)
//   zinc.FusedMatMulInto(X, W_1, b_1, Y) {outColumn = n_0}   (writes Y in place)
//   ...
// The first piece in program order defines Y; the others update it in
// place, as their op declares (ZincOps.def), so every pass orders them
// before Y's readers. Gemm pieces become FusedMatMul (Gemm with beta 1 and a
// bias vector is that product). Runs after the fusions, so the pieces'
// biases are already inside their products.
//
//===----------------------------------------------------------------------===//
#include "zinc/passes/Pass.h"
#include "zinc/support/MatMulGeometry.h"
#include "llvm/ADT/DenseMap.h"
#include <algorithm>

namespace zinc::passes {
namespace {

class ConcatInPlace : public Pass {
public:
  llvm::StringRef getName() const override { return "Concat In Place"; }
  llvm::StringRef getArgument() const override { return "concat-in-place"; }
  llvm::Expected<bool> run(ir::Graph &g, PassContext &ctx) override;
};

/// Whether `n` is a product the rewrite can redirect: MatMul, FusedMatMul
/// (with or without its bias), or a 2-D Gemm that is one (beta 1, C absent
/// or a vector along the columns), of floats, with one output.
bool isRedirectable(const ir::Node *n) {
  if (!n || n->outputs.size() != 1 || !n->outputs[0] || n->inputs.size() < 2 ||
      !n->inputs[0] || !n->inputs[1])
    return false;
  const ir::Value *y = n->outputs[0];
  if (!isFloatDType(y->dtype) || y->shape.empty())
    return false;
  if (n->domain.empty() && n->opType == "MatMul")
    return n->inputs[1]->shape.size() >= 2;
  if (n->domain == "zinc" && n->opType == "FusedMatMul")
    return n->inputs[1]->shape.size() >= 2 && !n->attrs.has("outColumn");
  if (n->domain.empty() && n->opType == "Gemm") {
    const ir::Value *c = n->inputs.size() > 2 ? n->inputs[2] : nullptr;
    return (!c || (n->attrs.getFloat("beta", 1.0) == 1.0 && c->shape.size() == 1 &&
                   c->shape[0] == y->shape.back() && c->dtype == y->dtype));
  }
  return false;
}

/// FusedMatMul's attributes for `n` (a Gemm keeps transA, transB, alpha).
AttributeList productAttributes(const ir::Node &n, int64_t column) {
  AttributeList attrs;
  if (n.opType == "Gemm") {
    for (const char *name : {"transA", "transB"})
      if (n.attrs.getInt(name, 0))
        attrs.set(makeIntAttr(name, 1));
    if (n.attrs.has("alpha"))
      attrs.set(makeFloatAttr("alpha", n.attrs.getFloat("alpha", 1.0)));
  } else {
    attrs = n.attrs;
  }
  attrs.set(makeIntAttr("outColumn", column));
  return attrs;
}

} // namespace

llvm::Expected<bool> ConcatInPlace::run(ir::Graph &g, PassContext &) {
  llvm::DenseMap<const ir::Node *, size_t> position;
  std::vector<ir::Node *> concats;
  for (ir::Node *n : g.nodes()) {
    position[n] = position.size();
    if (n->domain.empty() && n->opType == "Concat" && n->outputs.size() == 1 &&
        n->outputs[0] && n->inputs.size() >= 2)
      concats.push_back(n);
  }
  bool changed = false;
  for (ir::Node *concat : concats) {
    ir::Value *y = concat->outputs[0];
    int64_t rank = static_cast<int64_t>(y->shape.size());
    int64_t axis = concat->attrs.getInt("axis", 0);
    if (axis < 0)
      axis += rank;
    if (rank == 0 || axis != rank - 1)
      continue;
    bool ok = true;
    llvm::SmallVector<ir::Node *, 8> pieces;
    for (ir::Value *part : concat->inputs) {
      ok = ok && part && part->uses().size() == 1 && !g.isOutput(part) &&
           isRedirectable(part->def) && part->dtype == y->dtype &&
           part->shape.size() == y->shape.size() &&
           llvm::is_contained(pieces, part->def) == false;
      if (!ok)
        break;
      // Same rows as Y: only the last axis differs.
      for (int64_t d = 0; d + 1 < rank; ++d)
        ok = ok && part->shape[d] == y->shape[d];
      auto geometry = fusedMatMulGeometry(part->def->inputs[0]->shape,
                                          part->def->inputs[1]->shape,
                                          part->def->opType == "Gemm"
                                              ? productAttributes(*part->def, 0)
                                              : part->def->attrs);
      if (!geometry) {
        llvm::consumeError(geometry.takeError());
        ok = false;
      } else {
        ok = ok && geometry->out == part->shape;
      }
      pieces.push_back(part->def);
    }
    if (!ok)
      continue;
    ir::Node *first = *std::min_element(pieces.begin(), pieces.end(), [&](ir::Node *a, ir::Node *b) {
      return position.lookup(a) < position.lookup(b);
    });
    // Y is the first piece's output now: the Concat goes first (erasing a
    // node leaves its outputs undefined).
    g.eraseNode(concat);
    int64_t column = 0;
    for (ir::Node *p : pieces) {
      int64_t width = p->outputs[0]->shape.back();
      ir::Value *a = p->inputs[0], *b = p->inputs[1];
      ir::Value *bias = p->inputs.size() > 2 ? p->inputs[2] : nullptr;
      AttributeList attrs = productAttributes(*p, column);
      if (p == first) {
        llvm::SmallVector<ir::Value *, 3> inputs = {a, b};
        if (bias)
          inputs.push_back(bias);
        g.insertNode(p, "FusedMatMul", p->name, inputs, {y}, std::move(attrs),
                     kZincDomain);
      } else {
        g.insertNode(p, "FusedMatMulInto", p->name, {a, b, bias, y}, {},
                     std::move(attrs), kZincDomain);
      }
      column += width;
    }
    for (ir::Node *p : pieces)
      g.eraseNode(p);
    changed = true;
  }
  if (changed)
    g.eraseDeadValues();
  return changed;
}

std::unique_ptr<Pass> createConcatInPlacePass() {
  return std::make_unique<ConcatInPlace>();
}

} // namespace zinc::passes
