//===- FoldTransposes.cpp - fold-transposes: GEMMs read operands transposed //
//
// Exporters spell out every transpose: nn.Linear's W^T in a training-mode
// export, k^T in attention, and autodiff adds A^T and B^T to every MatMul's
// gradients. A Transpose that swaps the last two axes and feeds a MatMul is
// a BLAS flag, not a copy: the MatMul becomes zinc.FusedMatMul reading that
// operand transposed (transA/transB). A Transpose of a product's result,
// (A B)^T = B^T A^T, becomes the product of the swapped operands, so the
// gradient of a transposed weight is computed in the weight's own layout.
// A Reshape that only merges leading axes into rows ([B,T,C] -> [B*T,C])
// and feeds a product is a view of the same bytes: the product reads the
// unreshaped tensor flattened (flattenA/flattenB), which removes the two
// copies autodiff makes around every weight gradient X^T dY of a 3-D
// activation. Transposes and Reshapes nothing reads any more are left to
// dce.
//
//===----------------------------------------------------------------------===//
#include "zinc/passes/Pass.h"
#include "zinc/support/MatMulGeometry.h"
#include <numeric>

namespace zinc::passes {
namespace {

class FoldTransposes : public Pass {
public:
  llvm::StringRef getName() const override { return "Fold Transposes into GEMMs"; }
  llvm::StringRef getArgument() const override { return "fold-transposes"; }
  llvm::Expected<bool> run(ir::Graph &g, PassContext &ctx) override;
};

/// Transpose swapping only the last two axes.
bool swapsLastTwo(const ir::Node &n) {
  if (!n.domain.empty() || n.opType != "Transpose" || n.inputs.size() != 1 ||
      !n.inputs[0] || n.outputs.size() != 1 || !n.outputs[0])
    return false;
  size_t rank = n.inputs[0]->shape.size();
  if (rank < 2)
    return false;
  llvm::SmallVector<int64_t, 6> perm(rank);
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[rank - 1], perm[rank - 2]);
  return llvm::ArrayRef<int64_t>(n.attrs.getInts("perm")) ==
         llvm::ArrayRef<int64_t>(perm);
}

/// The value `v` transposes when its definition swaps its last two axes.
ir::Value *untransposed(const ir::Value *v) {
  return v && v->def && swapsLastTwo(*v->def) ? v->def->inputs[0] : nullptr;
}

/// The value `v` flattens when its definition is a Reshape merging the
/// leading axes of a rank >= 3 tensor into rows, keeping the last axis.
ir::Value *unflattened(const ir::Value *v) {
  const ir::Node *d = v ? v->def : nullptr;
  if (!d || !d->domain.empty() || d->opType != "Reshape" || d->inputs.empty() ||
      !d->inputs[0] || d->outputs.size() != 1 || !d->outputs[0])
    return nullptr;
  const ir::Value *in = d->inputs[0];
  if (in->shape.size() < 3 || v->shape.size() != 2 || in->dtype != v->dtype ||
      llvm::ArrayRef<int64_t>(flattenedToMatrix(in->shape)) !=
          llvm::ArrayRef<int64_t>(v->shape))
    return nullptr;
  return d->inputs[0];
}

struct Product {
  ir::Value *a, *b;
  bool transA, transB;
  double alpha;
  bool flattenA = false, flattenB = false;
};

/// A MatMul or FusedMatMul, as a product of (possibly transposed) operands.
llvm::Optional<Product> productOf(const ir::Node &n) {
  bool plain = n.domain.empty() && n.opType == "MatMul";
  bool fused = n.domain == "zinc" && n.opType == "FusedMatMul";
  if ((!plain && !fused) || n.inputs.size() != 2 || !n.inputs[0] ||
      !n.inputs[1] || n.outputs.size() != 1 || !n.outputs[0])
    return llvm::None;
  return Product{n.inputs[0],
                 n.inputs[1],
                 n.attrs.getInt("transA", 0) != 0,
                 n.attrs.getInt("transB", 0) != 0,
                 n.attrs.getFloat("alpha", 1.0),
                 n.attrs.getInt("flattenA", 0) != 0,
                 n.attrs.getInt("flattenB", 0) != 0};
}

/// Makes `n` compute `p` in place, keeping its name and output.
void becomeProduct(ir::Node &n, const Product &p) {
  n.domain = "zinc";
  n.opType = "FusedMatMul";
  n.setInputs({p.a, p.b});
  AttributeList attrs;
  attrs.set(makeIntAttr("transA", p.transA));
  attrs.set(makeIntAttr("transB", p.transB));
  if (p.alpha != 1.0)
    attrs.set(makeFloatAttr("alpha", p.alpha));
  if (p.flattenA)
    attrs.set(makeIntAttr("flattenA", 1));
  if (p.flattenB)
    attrs.set(makeIntAttr("flattenB", 1));
  n.attrs = std::move(attrs);
}

/// Whether `p` still multiplies to `out`'s shape (a rank-1 operand has no
/// last two axes to swap, and numpy's added axes must not move).
bool multipliesTo(const Product &p, const ir::Value &out) {
  auto g = matMulGeometry(
      p.flattenA ? flattenedToMatrix(p.a->shape) : p.a->shape,
      p.flattenB ? flattenedToMatrix(p.b->shape) : p.b->shape, p.transA,
      p.transB);
  if (!g) {
    llvm::consumeError(g.takeError());
    return false;
  }
  return llvm::ArrayRef<int64_t>(g->out) == llvm::ArrayRef<int64_t>(out.shape);
}

} // namespace

llvm::Expected<bool> FoldTransposes::run(ir::Graph &g, PassContext &) {
  bool changed = false;
  for (ir::Node *n : g.nodes()) {
    if (llvm::Optional<Product> p = productOf(*n)) {
      // Operands that are transposes are read through them.
      Product folded = *p;
      if (ir::Value *a = untransposed(p->a)) {
        folded.a = a;
        folded.transA = !p->transA;
      }
      if (ir::Value *b = untransposed(p->b)) {
        folded.b = b;
        folded.transB = !p->transB;
      }
      // Operands that are flattening Reshapes are read flattened.
      if (ir::Value *a = unflattened(folded.a)) {
        folded.a = a;
        folded.flattenA = true;
      }
      if (ir::Value *b = unflattened(folded.b)) {
        folded.b = b;
        folded.flattenB = true;
      }
      if ((folded.a != p->a || folded.b != p->b) &&
          multipliesTo(folded, *n->outputs[0])) {
        becomeProduct(*n, folded);
        changed = true;
      }
      continue;
    }
    // (A B)^T = B^T A^T, when the product is read only here.
    if (!swapsLastTwo(*n))
      continue;
    ir::Value *in = n->inputs[0];
    if (!in->def || in->uses().size() != 1 || g.isOutput(in))
      continue;
    llvm::Optional<Product> p = productOf(*in->def);
    if (!p || p->a->shape.size() < 2 || p->b->shape.size() < 2)
      continue;
    Product swapped{p->b,      p->a,        !p->transB, !p->transA,
                    p->alpha, p->flattenB, p->flattenA};
    if (!multipliesTo(swapped, *n->outputs[0]))
      continue;
    becomeProduct(*n, swapped);
    changed = true;
  }
  return changed;
}

std::unique_ptr<Pass> createFoldTransposesPass() {
  return std::make_unique<FoldTransposes>();
}

} // namespace zinc::passes
