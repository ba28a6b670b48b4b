//===- FoldScale.cpp - fold-scale: scalar factors into GEMMs' alpha -------===//
//
// Attention scales its scores by 1/sqrt(head width) after the product,
// (q @ k^T) * c, and autodiff scales the scores' gradient by c again before
// the two products that read it. Each Mul is a full pass over [B, H, T, T].
// BLAS scales for free (alpha), so:
//  - Mul(P, c) with P a product read only there becomes P with alpha * c
//    (P must have no bias: c would scale it too);
//  - Mul(x, c) read only as the A or B operand of products becomes x in
//    those products, each with its alpha times c.
// c must be a scalar float Constant, and the Mul's result not a graph
// output. Results change by rounding only (not
// at all when c is a power of two, as 1/sqrt(64) is).
//
//===----------------------------------------------------------------------===//
#include "zinc/passes/Pass.h"
#include "zinc/support/Attribute.h"
#include <cmath>

namespace zinc::passes {
namespace {

class FoldScale : public Pass {
public:
  llvm::StringRef getName() const override { return "Fold scalar factors into GEMMs"; }
  llvm::StringRef getArgument() const override { return "fold-scale"; }
  llvm::Expected<bool> run(ir::Graph &g, PassContext &ctx) override;
};

/// The finite value of a scalar float Constant, if `v` is one.
llvm::Optional<double> scalarConstant(const ir::Value *v) {
  const ir::Node *d = v ? v->def : nullptr;
  if (!d || !d->domain.empty() || d->opType != "Constant" || !isFloatDType(v->dtype))
    return llvm::None;
  const Attribute *a = d->attrs.find("value");
  if (!a || a->kind != AttrKind::Tensor)
    return llvm::None;
  llvm::Optional<double> c = scalarValue(a->tensor);
  if (!c || !std::isfinite(*c))
    return llvm::None;
  return c;
}

/// A MatMul or FusedMatMul (not a column tile of one), which can carry alpha.
bool isScalableProduct(const ir::Node *n) {
  return n && n->outputs.size() == 1 && n->outputs[0] && n->inputs.size() >= 2 &&
         ((n->domain.empty() && n->opType == "MatMul") ||
          (n->domain == "zinc" && n->opType == "FusedMatMul"));
}

void scaleAlpha(ir::Node &product, double c) {
  if (product.domain.empty()) { // MatMul has no alpha: it is a FusedMatMul now
    product.domain = "zinc";
    product.opType = "FusedMatMul";
  }
  product.attrs.set(makeFloatAttr("alpha", product.attrs.getFloat("alpha", 1.0) * c));
}

/// Mul(P, c) -> P with alpha * c.
bool foldIntoProducer(ir::Graph &g, ir::Node &mul, ir::Value *x, double c) {
  ir::Node *p = x->def;
  if (!isScalableProduct(p) || p->inputs.size() != 2 || x->uses().size() != 1 ||
      g.isOutput(x) || g.isOutput(mul.outputs[0]))
    return false;
  scaleAlpha(*p, c);
  g.replaceAllUsesWith(mul.outputs[0], x);
  g.eraseNode(&mul);
  return true;
}

/// Mul(x, c) read only as products' A or B -> x, each product scaled.
bool foldIntoReaders(ir::Graph &g, ir::Node &mul, ir::Value *x, double c) {
  ir::Value *y = mul.outputs[0];
  if (g.isOutput(y) || y->uses().empty())
    return false;
  for (const ir::Use &u : y->uses()) {
    const ir::Node *r = u.user;
    if (!isScalableProduct(r) || u.operand > 1 || r->inputs[0] == r->inputs[1])
      return false;
  }
  llvm::SmallVector<ir::Use, 4> uses(y->uses().begin(), y->uses().end());
  for (const ir::Use &u : uses) {
    scaleAlpha(*u.user, c);
    u.user->setInput(u.operand, x);
  }
  g.eraseNode(&mul);
  return true;
}

} // namespace

llvm::Expected<bool> FoldScale::run(ir::Graph &g, PassContext &) {
  bool changed = false;
  llvm::SmallVector<ir::Node *, 32> muls;
  for (ir::Node *n : g.nodes())
    if (n->domain.empty() && n->opType == "Mul" && n->inputs.size() == 2 &&
        n->inputs[0] && n->inputs[1] && n->outputs.size() == 1 && n->outputs[0])
      muls.push_back(n);
  for (ir::Node *mul : muls) {
    ir::Value *y = mul->outputs[0];
    for (unsigned i = 0; i < 2; ++i) {
      ir::Value *x = mul->inputs[i];
      llvm::Optional<double> c = scalarConstant(mul->inputs[1 - i]);
      if (!c || x->dtype != y->dtype || x->shape != y->shape || !isFloatDType(x->dtype))
        continue;
      if (foldIntoProducer(g, *mul, x, *c) || foldIntoReaders(g, *mul, x, *c)) {
        changed = true;
        break;
      }
    }
  }
  if (changed)
    g.eraseDeadValues();
  return changed;
}

std::unique_ptr<Pass> createFoldScalePass() { return std::make_unique<FoldScale>(); }

} // namespace zinc::passes
