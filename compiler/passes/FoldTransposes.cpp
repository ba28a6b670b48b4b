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
// activation. Last, an f32/f64 operand made by a chain of Split (along
// any axis), Reshape (splitting the last axis in two) and Transpose is a
// strided view of the chain's source: attention's heads, q, k, v =
// c_attn(x).split(C, 2), then view(B, T, H, D).transpose(1, 2), and the
// same layout of their gradients' inputs. The product reads the source
// through the view (shapeA/viewA: the shape, then [offset, stride per
// axis]), BLAS's batch offsets and leading dimension. Transposes, Reshapes
// and Splits nothing reads any more are left to dce.
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

/// A tensor read as `shape` with `strides` from element `offset` of `base`.
struct StridedView {
  ir::Value *base;
  llvm::SmallVector<int64_t, 6> shape, strides;
  int64_t offset = 0;
};

StridedView wholeValue(ir::Value *v) {
  StridedView s{v, {}, {}, 0};
  s.shape.assign(v->shape.begin(), v->shape.end());
  s.strides.assign(v->shape.size(), 1);
  for (size_t d = v->shape.size(); d-- > 1;)
    s.strides[d - 1] = s.strides[d] * v->shape[d];
  return s;
}

/// `v` as a view of the furthest tensor that a chain of Transposes,
/// last-axis-splitting Reshapes and Splits reads: only these move no bytes
/// a strided read cannot follow.
StridedView viewThrough(ir::Value *v) {
  const ir::Node *d = v->def;
  if (!d || !d->domain.empty() || d->inputs.empty() || !d->inputs[0] ||
      d->inputs[0]->dtype != v->dtype)
    return wholeValue(v);
  ir::Value *in = d->inputs[0];
  size_t rank = v->shape.size();
  if (d->opType == "Transpose" && d->outputs.size() == 1) {
    llvm::ArrayRef<int64_t> perm = d->attrs.getInts("perm");
    if (perm.size() != rank)
      return wholeValue(v);
    StridedView s = viewThrough(in), t = s;
    for (size_t i = 0; i < rank; ++i) {
      t.shape[i] = s.shape[perm[i]];
      t.strides[i] = s.strides[perm[i]];
    }
    return t;
  }
  if (d->opType == "Reshape" && d->outputs.size() == 1 &&
      rank == in->shape.size() + 1 && rank >= 2 &&
      llvm::ArrayRef<int64_t>(v->shape).take_front(rank - 2) ==
          llvm::ArrayRef<int64_t>(in->shape).drop_back() &&
      v->shape[rank - 2] * v->shape[rank - 1] == in->shape.back()) {
    StridedView s = viewThrough(in);
    int64_t last = s.strides.back();
    s.shape.back() = v->shape[rank - 2];
    s.shape.push_back(v->shape[rank - 1]);
    s.strides.back() = last * v->shape[rank - 1];
    s.strides.push_back(last);
    return s;
  }
  if (d->opType == "Split") {
    int64_t axis = d->attrs.getInt("axis", 0);
    if (axis < 0)
      axis += static_cast<int64_t>(rank);
    if (axis < 0 || axis >= static_cast<int64_t>(rank) || in->shape.size() != rank)
      return wholeValue(v);
    int64_t start = 0;
    for (const ir::Value *o : d->outputs) {
      if (o == v)
        break;
      if (!o)
        return wholeValue(v);
      start += o->shape[axis];
    }
    StridedView s = viewThrough(in);
    s.offset += start * s.strides[axis];
    s.shape[axis] = v->shape[axis];
    return s;
  }
  return wholeValue(v);
}

/// Whether a node updates `v` in place.
bool updatedInPlace(const ir::Value *v) {
  return llvm::any_of(v->uses(), [](const ir::Use &u) {
    return u.user->writesInput(u.operand);
  });
}

/// The view of a product operand worth reading through: one that skips a
/// copy, of a float or double tensor no node updates, whose matrices have
/// a contiguous axis (BLAS's leading dimension is the other).
llvm::Optional<StridedView> gemmView(ir::Value *operand) {
  if (operand->dtype != DType::F32 && operand->dtype != DType::F64)
    return llvm::None;
  StridedView s = viewThrough(operand);
  size_t r = s.shape.size();
  bool transposed;
  int64_t ld;
  if (s.base == operand || r < 2 || updatedInPlace(s.base) ||
      !stridedMatrixLayout(s.shape[r - 2], s.shape[r - 1], s.strides[r - 2],
                           s.strides[r - 1], transposed, ld))
    return llvm::None;
  return s;
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
      // A product already reading an operand flattened or through a view is
      // as folded as it gets (a transpose of a flattening is not the
      // flattening's transpose).
      if (n->attrs.has("flattenA") || n->attrs.has("flattenB") ||
          n->attrs.has("viewA") || n->attrs.has("viewB"))
        continue;
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
      // Operands that are views of another tensor are read through them.
      if (n->attrs.has("viewA") || n->attrs.has("viewB"))
        continue;
      llvm::Optional<StridedView> va, vb;
      if (!folded.flattenA)
        va = gemmView(n->inputs[0]);
      if (!folded.flattenB)
        vb = gemmView(n->inputs[1]);
      if (!va && !vb)
        continue;
      Product viewed = *productOf(*n);
      becomeProduct(*n, viewed);
      auto setView = [&](unsigned i, const StridedView &v, const char *which) {
        llvm::SmallVector<int64_t, 7> view{v.offset};
        view.append(v.strides.begin(), v.strides.end());
        n->attrs.set(makeIntsAttr(std::string("shape") + which, v.shape));
        n->attrs.set(makeIntsAttr(std::string("view") + which, view));
        n->setInput(i, v.base);
      };
      if (va)
        setView(0, *va, "A");
      if (vb)
        setView(1, *vb, "B");
      changed = true;
      continue;
    }
    // (A B)^T = B^T A^T, when the product is read only here.
    if (!swapsLastTwo(*n))
      continue;
    ir::Value *in = n->inputs[0];
    if (!in->def || in->uses().size() != 1 || g.isOutput(in))
      continue;
    llvm::Optional<Product> p = productOf(*in->def);
    // A product reading through views keeps them: productOf does not carry
    // them over.
    if (!p || p->a->shape.size() < 2 || p->b->shape.size() < 2 ||
        in->def->attrs.has("viewA") || in->def->attrs.has("viewB"))
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
