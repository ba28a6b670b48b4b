//===- MatMul.cpp - Gradient rules of matrix products ---------------------===//
#include "Rules.h"
#include <numeric>

namespace zinc::autodiff {

/// Swaps the last two axes. Of a value that is itself such a transpose
/// (the W^T a training-mode export computes for every linear layer), the
/// value it transposed: backward then reads the parameter, which offloading
/// prefetches anyway, instead of keeping a transposed copy of every weight
/// alive from forward to backward.
static ir::Value *transposeLastTwo(GradientBuilder &b, ir::Value *v) {
  llvm::SmallVector<int64_t, 4> perm(v->shape.size());
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
  const ir::Node *def = v->def;
  if (def && def->domain.empty() && def->opType == "Transpose" &&
      def->inputs.size() == 1 && def->inputs[0] &&
      def->inputs[0]->dtype == v->dtype &&
      llvm::ArrayRef<int64_t>(def->attrs.getInts("perm")) ==
          llvm::ArrayRef<int64_t>(perm))
    return def->inputs[0];
  return b.transpose(v, perm);
}

static ir::Value *matmul(GradientBuilder &b, ir::Value *x, ir::Value *y) {
  llvm::ArrayRef<int64_t> xs = x->shape, ys = y->shape;
  llvm::SmallVector<int64_t, 4> shape =
      GradientBuilder::broadcast(xs.drop_back(2), ys.drop_back(2));
  shape.push_back(xs[xs.size() - 2]);
  shape.push_back(ys.back());
  return b.op("MatMul", {x, y}, {x->dtype, shape});
}

/// numpy matmul: a 1-D left operand is a row [1,K], a 1-D right operand a
/// column [K,1]; batch axes broadcast. The gradients are computed on the
/// 2-D-or-more forms and reduced back to each operand's own shape.
llvm::Error gradMatMul(GradientBuilder &b) {
  ir::Value *A = b.input(0), *B = b.input(1);
  ir::Value *a = A->shape.size() == 1 ? b.reshape(A, {1, A->shape[0]}) : A;
  ir::Value *c = B->shape.size() == 1 ? b.reshape(B, {B->shape[0], 1}) : B;
  llvm::SmallVector<int64_t, 4> outShape = GradientBuilder::broadcast(
      llvm::ArrayRef<int64_t>(a->shape).drop_back(2),
      llvm::ArrayRef<int64_t>(c->shape).drop_back(2));
  outShape.push_back(a->shape[a->shape.size() - 2]);
  outShape.push_back(c->shape.back());
  ir::Value *dy = b.reshape(b.outputGrad(0), outShape);
  if (b.needsGrad(0)) {
    ir::Value *da = b.sumToShape(matmul(b, dy, transposeLastTwo(b, c)), a->shape);
    if (auto err = b.setGrad(0, b.reshape(da, A->shape)))
      return err;
  }
  if (b.needsGrad(1) && c->shape.size() == 2 && a->shape.size() > 2) {
    // A weight shared by every batch row (the linear layer): one GEMM over
    // the flattened rows, never a batch of per-row products summed after.
    int64_t k = a->shape.back(), n = c->shape.back();
    int64_t rows = a->numElements() / k;
    ir::Value *a2 = b.reshape(a, {rows, k});
    ir::Value *dy2 = b.reshape(dy, {rows, n});
    ir::Value *dc = matmul(b, transposeLastTwo(b, a2), dy2);
    if (auto err = b.setGrad(1, b.reshape(dc, B->shape)))
      return err;
  } else if (b.needsGrad(1)) {
    ir::Value *dc = b.sumToShape(matmul(b, transposeLastTwo(b, a), dy), c->shape);
    if (auto err = b.setGrad(1, b.reshape(dc, B->shape)))
      return err;
  }
  return llvm::Error::success();
}

} // namespace zinc::autodiff
