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
// place, as their op declares (Ops.def), so every pass orders them
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

/// What the tiles joined by a Concat are, and so how they can write the
/// joined output themselves.
enum class PieceKind { Product, Conv, Gather };

/// Whether `p` (the Concat's input `part`) is a tile of `kind` along the
/// Concat's `axis` that can write its share of `y` directly.
bool isPiece(const ir::Node *p, const ir::Value *part, const ir::Value *y, int64_t axis,
             PieceKind kind) {
  int64_t rank = static_cast<int64_t>(y->shape.size());
  if (!p || part->dtype != y->dtype || part->shape.size() != y->shape.size())
    return false;
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis && part->shape[d] != y->shape[d])
      return false;
  switch (kind) {
  case PieceKind::Product: {
    if (axis != rank - 1 || !isRedirectable(p))
      return false;
    auto geometry = fusedMatMulGeometry(
        p->inputs[0]->shape, p->inputs[1]->shape,
        p->opType == "Gemm" ? productAttributes(*p, 0) : p->attrs);
    if (!geometry) {
      llvm::consumeError(geometry.takeError());
      return false;
    }
    return geometry->out == part->shape;
  }
  case PieceKind::Conv:
    return p->domain.empty() && p->opType == "Conv" && axis == 1 && rank >= 3 &&
           p->attrs.getInt("group", 1) == 1 && p->inputs.size() >= 2 && p->inputs[0] &&
           p->inputs[1] && isFloatDType(part->dtype) && p->outputs.size() == 1;
  case PieceKind::Gather:
    return p->domain.empty() && p->opType == "Gather" && axis == rank - 1 &&
           p->attrs.getInt("axis", 0) == 0 && p->inputs.size() == 2 && p->inputs[0] &&
           p->inputs[0]->shape.size() == 2 && p->inputs[1] && p->outputs.size() == 1;
  }
  return false;
}

/// The piece `p` writing its share of `y` from `offset` on: the first
/// (`defines`) as the op that defines y, the others as its Into form.
void redirect(ir::Graph &g, ir::Node *p, ir::Value *y, int64_t offset, bool defines,
              PieceKind kind) {
  ir::Value *a = p->inputs[0], *b = p->inputs[1];
  ir::Value *third = p->inputs.size() > 2 ? p->inputs[2] : nullptr;
  AttributeList attrs;
  llvm::StringRef op;
  llvm::SmallVector<ir::Value *, 4> inputs = {a, b};
  switch (kind) {
  case PieceKind::Product:
    attrs = productAttributes(*p, offset);
    op = defines ? "FusedMatMul" : "FusedMatMulInto";
    if (third || !defines)
      inputs.push_back(third);
    break;
  case PieceKind::Conv:
    attrs = p->attrs;
    attrs.set(makeIntAttr("outChannel", offset));
    op = defines ? "ConvChannels" : "ConvChannelsInto";
    if (third || !defines)
      inputs.push_back(third);
    break;
  case PieceKind::Gather:
    attrs.set(makeIntAttr("outColumn", offset));
    op = defines ? "GatherColumns" : "GatherColumnsInto";
    break;
  }
  if (defines)
    g.insertNode(p, op, p->name, inputs, {y}, std::move(attrs), kZincDomain);
  else {
    inputs.push_back(y);
    g.insertNode(p, op, p->name, inputs, {}, std::move(attrs), kZincDomain);
  }
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
    if (rank == 0 || axis < 0 || axis >= rank)
      continue;
    for (PieceKind kind : {PieceKind::Product, PieceKind::Conv, PieceKind::Gather}) {
      bool ok = true;
      llvm::SmallVector<ir::Node *, 8> pieces;
      for (ir::Value *part : concat->inputs) {
        ok = part && part->uses().size() == 1 && !g.isOutput(part) &&
             !llvm::is_contained(pieces, part->def) && isPiece(part->def, part, y, axis, kind);
        if (!ok)
          break;
        pieces.push_back(part->def);
      }
      if (!ok)
        continue;
      ir::Node *first =
          *std::min_element(pieces.begin(), pieces.end(), [&](ir::Node *a, ir::Node *b) {
            return position.lookup(a) < position.lookup(b);
          });
      // Y is the first piece's output now: the Concat goes first (erasing a
      // node leaves its outputs undefined).
      g.eraseNode(concat);
      int64_t offset = 0;
      for (ir::Node *p : pieces) {
        int64_t width = p->outputs[0]->shape[axis];
        redirect(g, p, y, offset, p == first, kind);
        offset += width;
      }
      for (ir::Node *p : pieces)
        g.eraseNode(p);
      changed = true;
      break;
    }
  }
  if (changed)
    g.eraseDeadValues();
  return changed;
}

std::unique_ptr<Pass> createConcatInPlacePass() {
  return std::make_unique<ConcatInPlace>();
}

} // namespace zinc::passes
