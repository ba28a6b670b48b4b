//===- FuseGelu.cpp - fuse-gelu: exporters' GELU formulas become one Gelu -===//
//
// Before opset 20 ONNX has no Gelu, so exporters write it out:
//   erf form   x * 0.5 * (1 + Erf(x / sqrt 2))          (nn.GELU, F.gelu)
//   tanh form  0.5 * x * (1 + Tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
//              (nn.GELU(approximate="tanh"), transformers' NewGELU),
// five to nine elementwise nodes forward and as many again once autodiff
// has run, each a pass over the activation. This pass runs before
// build-training and turns each into one Gelu node (approximate "none" or
// "tanh"), whose gradient is the single GeluGrad. The product x * 0.5 * s
// is recognised in any association and operand order, x^3 as Pow(x, 3) or
// as products of x, and the constants within float rounding of theirs.
// Intermediates read elsewhere (or graph outputs) leave the pattern alone.
//
//===----------------------------------------------------------------------===//
#include "compiler/passes/FusionPatterns.h"
#include "zinc/passes/Pass.h"
#include "zinc/support/Attribute.h"
#include "llvm/ADT/SmallPtrSet.h"
#include <cmath>

namespace zinc::passes {
using namespace fusion;
namespace {

class FuseGelu : public Pass {
public:
  llvm::StringRef getName() const override { return "Fuse GELU formulas"; }
  llvm::StringRef getArgument() const override { return "fuse-gelu"; }
  llvm::Expected<bool> run(ir::Graph &g, PassContext &ctx) override;
};

/// Whether `v` is x^3: Pow(x, 3), x * (x * x) or (x * x) * x.
bool isCube(const ir::Value *v, const ir::Value *x) {
  if (const ir::Node *pow = defOf(v, "Pow", 2))
    return pow->inputs[0] == x && isConstant(pow->inputs[1], 3.0);
  const ir::Node *mul = defOf(v, "Mul", 2);
  if (!mul)
    return false;
  const ir::Value *sq = otherThan(mul, x);
  const ir::Node *sqDef = defOf(sq, "Mul", 2);
  return sqDef && sqDef->inputs[0] == x && sqDef->inputs[1] == x;
}

struct Gelu {
  ir::Value *x = nullptr;
  /// s = 1 + erf(..) or 1 + tanh(..): what x * 0.5 multiplies.
  ir::Value *gate = nullptr;
  llvm::StringRef approximate;
};

/// x and s of an Erf node inside 1 + erf(x / sqrt 2).
llvm::Optional<Gelu> erfForm(const ir::Graph &g, const ir::Node &erf) {
  if (!isOp(&erf, "Erf", 1) || !onlyUser(g, erf.inputs[0]))
    return llvm::None;
  ir::Value *x = nullptr;
  if (const ir::Node *div = defOf(erf.inputs[0], "Div", 2))
    x = isConstant(div->inputs[1], M_SQRT2) ? div->inputs[0] : nullptr;
  else if (const ir::Node *mul = defOf(erf.inputs[0], "Mul", 2))
    x = otherThanConstant(mul, M_SQRT1_2);
  const ir::Node *add = onlyUser(g, erf.outputs[0]);
  if (!x || !isOp(add, "Add", 2) || otherThanConstant(add, 1.0) != erf.outputs[0])
    return llvm::None;
  return Gelu{x, add->outputs[0], "none"};
}

/// x and s of a Tanh node inside 1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)).
llvm::Optional<Gelu> tanhForm(const ir::Graph &g, const ir::Node &tanh) {
  if (!isOp(&tanh, "Tanh", 1) || !onlyUser(g, tanh.inputs[0]))
    return llvm::None;
  const ir::Node *scaled = defOf(tanh.inputs[0], "Mul", 2);
  ir::Value *inner = scaled ? otherThanConstant(scaled, std::sqrt(2 / M_PI)) : nullptr;
  const ir::Node *sum = defOf(inner, "Add", 2);
  if (!sum || !onlyUser(g, inner))
    return llvm::None;
  // x + 0.044715 x^3, in either order.
  for (int i = 0; i < 2; ++i) {
    ir::Value *x = sum->inputs[i], *term = sum->inputs[1 - i];
    const ir::Node *mul = defOf(term, "Mul", 2);
    if (!mul || !onlyUser(g, term))
      continue;
    ir::Value *cube = otherThanConstant(mul, 0.044715);
    if (!cube || !isCube(cube, x))
      continue;
    const ir::Node *add = onlyUser(g, tanh.outputs[0]);
    if (!isOp(add, "Add", 2) || otherThanConstant(add, 1.0) != tanh.outputs[0])
      return llvm::None;
    return Gelu{x, add->outputs[0], "tanh"};
  }
  return llvm::None;
}

/// The node computing x * 0.5 * s in any association, with its inner
/// product read only by it: (x s) 0.5, (0.5 s) x, s (x 0.5), ...
ir::Node *productRoot(const ir::Graph &g, const Gelu &m) {
  const ir::Node *first = onlyUser(g, m.gate);
  if (!isOp(first, "Mul", 2))
    return nullptr;
  ir::Value *other = otherThan(first, m.gate);
  if (!other)
    return nullptr;
  // s times (x 0.5): the first product is the root.
  if (const ir::Node *half = defOf(other, "Mul", 2))
    if (onlyUser(g, other) && otherThanConstant(half, 0.5) == m.x)
      return const_cast<ir::Node *>(first);
  // s times x (or 0.5), then times 0.5 (or x).
  const ir::Node *second = onlyUser(g, first->outputs[0]);
  if (!isOp(second, "Mul", 2))
    return nullptr;
  ir::Value *last = otherThan(second, first->outputs[0]);
  bool ok = (other == m.x && isConstant(last, 0.5)) ||
            (isConstant(other, 0.5) && last == m.x);
  return ok ? const_cast<ir::Node *>(second) : nullptr;
}

/// Erases the pattern's nodes that nothing reads any more, innermost last:
/// each is erased once its outputs are unused, until none changes.
void eraseDead(ir::Graph &g, llvm::SmallVectorImpl<ir::Node *> &candidates) {
  bool erased = true;
  while (erased) {
    erased = false;
    // By index: the loop appends to the list it walks.
    for (size_t i = 0; i < candidates.size(); ++i) {
      ir::Node *n = candidates[i];
      if (!n)
        continue;
      bool dead = true;
      for (const ir::Value *o : n->outputs)
        dead &= !o || (!o->hasUses() && !g.isOutput(o));
      if (!dead)
        continue;
      // Its operands' definitions may now be dead too.
      for (ir::Value *in : n->inputs)
        if (in && in->def && llvm::find(candidates, in->def) == candidates.end())
          candidates.push_back(in->def);
      g.eraseNode(n);
      candidates[i] = nullptr;
      erased = true;
    }
  }
}

} // namespace

llvm::Expected<bool> FuseGelu::run(ir::Graph &g, PassContext &) {
  llvm::SmallVector<ir::Node *, 16> roots;
  llvm::SmallVector<Gelu, 16> matches;
  for (ir::Node *n : g.nodes()) {
    llvm::Optional<Gelu> m = erfForm(g, *n);
    if (!m)
      m = tanhForm(g, *n);
    if (!m || !isFloatDType(m->x->dtype))
      continue;
    ir::Node *root = productRoot(g, *m);
    if (!root || root->outputs[0]->shape != m->x->shape ||
        root->outputs[0]->dtype != m->x->dtype)
      continue;
    roots.push_back(root);
    matches.push_back(*m);
  }
  for (size_t i = 0; i < roots.size(); ++i) {
    ir::Node *root = roots[i];
    llvm::SmallVector<ir::Node *, 16> old;
    for (ir::Value *in : root->inputs)
      if (in && in->def)
        old.push_back(in->def);
    root->opType = "Gelu";
    root->domain = "";
    root->setInputs({matches[i].x});
    AttributeList attrs;
    attrs.set(makeStringAttr("approximate", matches[i].approximate));
    root->attrs = std::move(attrs);
    eraseDead(g, old);
  }
  if (!roots.empty())
    g.eraseDeadValues();
  return !roots.empty();
}

std::unique_ptr<Pass> createFuseGeluPass() {
  return std::make_unique<FuseGelu>();
}

} // namespace zinc::passes
