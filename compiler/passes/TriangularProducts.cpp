//===- TriangularProducts.cpp - triangular-products: causal attention -----===//
//
// Under a causal mask, half of every [T,T] matrix of attention is known:
//  - P = MaskedSoftmax(S, mask) is exactly 0 wherever the mask is set, so
//    with a mask set everywhere above the diagonal P is lower triangular,
//    and so is its gradient SoftmaxGrad(P, dP) = P * (dP - sum(dP P)).
//  - The scores S are read only where the mask is clear (MaskedSoftmax
//    skips the rest), and the gradient dP only where P is nonzero.
//  - Dropout on P (and its gradient) keeps those zeros: the analysis looks
//    through Identity, Dropout and DropoutGrad.
// So the products P @ V, P^T @ dY, dS @ K and Q^T @ dS may skip the zero
// triangle of their operand, and Q @ K^T and dY @ V^T need only their
// output's lower triangle: about half of attention's arithmetic. This pass
// marks them on zinc.FusedMatMul (a MatMul becomes one):
//  - lowerA / lowerB = 1: the operand as stored (before transA / transB)
//    is zero above its last two axes' diagonal. A promise the pass has
//    proved: a kernel may skip those terms, or multiply them as usual.
//  - lowerY = 1: the product writes zeros above its output's diagonal
//    (Y = tril(op(A) op(B))), and may skip computing them. The readers
//    above do not tell the difference: MaskedSoftmax ignores those entries
//    and SoftmaxGrad multiplies them by P's zeros.
// The mask must be a Constant, true at every (i, j > i) of each [T,T].
// Runs after fuse-masked-softmax and fold-scale (which takes attention's
// 1/sqrt(d) Mul from between the product and the softmax).
//
//===----------------------------------------------------------------------===//
#include "zinc/passes/Pass.h"
#include "zinc/support/Attribute.h"
#include "llvm/ADT/DenseMap.h"

namespace zinc::passes {
namespace {

class TriangularProducts : public Pass {
public:
  llvm::StringRef getName() const override { return "Skip causal attention's zero triangles"; }
  llvm::StringRef getArgument() const override { return "triangular-products"; }
  llvm::Expected<bool> run(ir::Graph &g, PassContext &ctx) override;
};

bool isZinc(const ir::Node *n, llvm::StringRef op) {
  return n && n->domain == "zinc" && n->opType == op;
}

/// Whether v's last two axes are square (at least 2 x 2).
bool squareMatrices(const ir::Value *v) {
  size_t r = v ? v->shape.size() : 0;
  return r >= 2 && v->shape[r - 1] == v->shape[r - 2] && v->shape[r - 1] > 1;
}

/// Whether `mask` is a bool Constant set at every (i, j > i) of each of
/// its [T,T] matrices.
bool masksAboveDiagonal(const ir::Value *mask) {
  const ir::Node *d = mask ? mask->def : nullptr;
  if (!d || !d->domain.empty() || d->opType != "Constant" || mask->dtype != DType::Bool ||
      !squareMatrices(mask))
    return false;
  const Attribute *a = d->attrs.find("value");
  if (!a || a->kind != AttrKind::Tensor || a->tensor.dtype != DType::Bool)
    return false;
  const std::vector<uint8_t> &bytes = a->tensor.bytes;
  int64_t t = mask->shape.back(), matrices = mask->numElements() / (t * t);
  if (static_cast<int64_t>(bytes.size()) != matrices * t * t)
    return false;
  for (int64_t m = 0; m < matrices; ++m)
    for (int64_t i = 0; i < t; ++i)
      for (int64_t j = i + 1; j < t; ++j)
        if (!bytes[(m * t + i) * t + j])
          return false;
  return true;
}

/// x, when `out` is x times a per-element factor (x * keep * scale) that
/// keeps x's zeros and reads nothing else of x: Identity, training-mode
/// Dropout (ratio 0 left as it is or not), and Dropout's gradient.
const ir::Value *scaledCopyOf(const ir::Node &n, const ir::Value *out) {
  if (n.inputs.empty() || !n.inputs[0] || n.outputs.empty() || n.outputs[0] != out ||
      n.inputs[0]->shape != out->shape)
    return nullptr;
  bool elementwise = (n.domain.empty() && (n.opType == "Identity" || n.opType == "Dropout")) ||
                     isZinc(&n, "DropoutGrad");
  return elementwise ? n.inputs[0] : nullptr;
}

class Analysis {
public:
  explicit Analysis(const ir::Graph &g) : g(g) {}

  /// Whether v is zero above the diagonal of its last two axes.
  bool isLower(const ir::Value *v) {
    auto it = lower.find(v);
    if (it != lower.end())
      return it->second;
    bool result = false;
    const ir::Node *d = v ? v->def : nullptr;
    if (squareMatrices(v) && d) {
      if (isZinc(d, "MaskedSoftmax") && d->inputs.size() == 2)
        result = masksAboveDiagonal(d->inputs[1]);
      else if (isZinc(d, "SoftmaxGrad") && d->inputs.size() == 2 && d->inputs[0])
        result = d->inputs[0]->shape == v->shape && isLower(d->inputs[0]);
      else if (const ir::Value *x = scaledCopyOf(*d, v))
        result = isLower(x);
    }
    lower[v] = result;
    return result;
  }

  /// Whether every reader of v reads only its lower triangle (and v is not
  /// a graph output).
  bool onlyLowerRead(const ir::Value *v) {
    if (!squareMatrices(v) || g.isOutput(v) || v->uses().empty())
      return false;
    for (const ir::Use &u : v->uses()) {
      const ir::Node *r = u.user;
      bool masked = isZinc(r, "MaskedSoftmax") && u.operand == 0 &&
                    r->inputs.size() == 2 && masksAboveDiagonal(r->inputs[1]);
      bool gradient = isZinc(r, "SoftmaxGrad") && u.operand == 1 &&
                      r->inputs.size() == 2 && r->inputs[0] &&
                      r->inputs[0]->shape == v->shape && isLower(r->inputs[0]);
      const ir::Value *copy = nullptr;
      for (const ir::Value *out : r->outputs)
        if (out && scaledCopyOf(*r, out) == v && u.operand == 0)
          copy = out;
      if (!masked && !gradient && !(copy && onlyLowerRead(copy)))
        return false;
    }
    return true;
  }

private:
  const ir::Graph &g;
  llvm::DenseMap<const ir::Value *, bool> lower;
};

/// A two- or three-input MatMul / FusedMatMul with one output.
bool isProduct(const ir::Node *n) {
  return n && n->outputs.size() == 1 && n->outputs[0] && n->inputs.size() >= 2 &&
         n->inputs[0] && n->inputs[1] &&
         ((n->domain.empty() && n->opType == "MatMul" && n->inputs.size() == 2) ||
          (n->domain == "zinc" && n->opType == "FusedMatMul"));
}

/// Whether the product reads operand X ("A" or "B") as the value itself:
/// no view, flattening or 1-D promotion that would move its diagonal.
bool readsWhole(const ir::Node &p, unsigned operand) {
  llvm::StringRef x = operand == 0 ? "A" : "B";
  return !p.attrs.has(("view" + x).str()) && !p.attrs.has(("shape" + x).str()) &&
         !p.attrs.has(("flatten" + x).str()) && p.inputs[operand]->shape.size() >= 2;
}

void mark(ir::Node &p, llvm::StringRef attr) {
  if (p.domain.empty()) {
    p.domain = "zinc";
    p.opType = "FusedMatMul";
  }
  p.attrs.set(makeIntAttr(attr, 1));
}

} // namespace

llvm::Expected<bool> TriangularProducts::run(ir::Graph &g, PassContext &) {
  Analysis analysis(g);
  bool changed = false;
  for (ir::Node *p : g.nodes()) {
    if (!isProduct(p) || p->attrs.has("lowerA") || p->attrs.has("lowerB") ||
        p->attrs.has("lowerY"))
      continue;
    // The output: only without a bias, which tril would cut too.
    if (p->inputs.size() == 2 && analysis.onlyLowerRead(p->outputs[0])) {
      mark(*p, "lowerY");
      changed = true;
      continue;
    }
    for (unsigned operand = 0; operand < 2; ++operand)
      if (readsWhole(*p, operand) && analysis.isLower(p->inputs[operand])) {
        mark(*p, operand == 0 ? "lowerA" : "lowerB");
        changed = true;
        break;
      }
  }
  return changed;
}

std::unique_ptr<Pass> createTriangularProductsPass() {
  return std::make_unique<TriangularProducts>();
}

} // namespace zinc::passes
