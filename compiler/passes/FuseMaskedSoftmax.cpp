//===- FuseMaskedSoftmax.cpp - fuse-masked-softmax: causal attention ------===//
//
// Attention written as users write it, att.masked_fill(mask, -inf) then
// softmax, exports as Where(mask, -inf, x) -> Softmax over the last axis;
// autodiff adds Where(mask, 0, SoftmaxGrad(y, dy)) to the backward pass.
// Each Where is a full pass over the [B, H, T, T] scores. After autodiff
// this pass makes the pair one zinc.MaskedSoftmax(x, mask): masked
// positions come out exactly 0 (exp(-inf) = 0), so SoftmaxGrad's
// y * (dy - sum(dy y)) is already 0 there and the backward Where passes
// its input through unchanged: its readers read the SoftmaxGrad instead.
// (A row masked whole is NaN, forward and backward, as in PyTorch; the
// backward Where used to zero those NaNs.)
//
// The mask must broadcast to the scores through leading axes only (a
// [T, T] or [1, 1, T, T] causal mask of [B, H, T, T] scores): the kernel
// reads mask row r % (mask rows).
//
//===----------------------------------------------------------------------===//
#include "compiler/passes/FusionPatterns.h"
#include "zinc/passes/Pass.h"
#include "zinc/support/Attribute.h"
#include <cmath>

namespace zinc::passes {
using fusion::constantScalar;
using fusion::softmaxOverLastAxis;
namespace {

class FuseMaskedSoftmax : public Pass {
public:
  llvm::StringRef getName() const override { return "Fuse masked softmax"; }
  llvm::StringRef getArgument() const override { return "fuse-masked-softmax"; }
  llvm::Expected<bool> run(ir::Graph &g, PassContext &ctx) override;
};

bool isOnnx(const ir::Node *n, llvm::StringRef op, size_t inputs) {
  return n && n->domain.empty() && n->opType == op &&
         n->inputs.size() == inputs && n->outputs.size() == 1 && n->outputs[0];
}

/// Whether `mask` reaches `x`'s shape by broadcasting leading axes only:
/// with its leading 1s dropped it is a suffix of x's shape, the last axis
/// included.
bool broadcastsByRows(llvm::ArrayRef<int64_t> mask, llvm::ArrayRef<int64_t> x) {
  while (!mask.empty() && mask.front() == 1 && mask.size() > 1)
    mask = mask.drop_front();
  if (mask.size() > x.size() || mask.empty())
    return false;
  return mask == x.take_back(mask.size());
}

} // namespace

llvm::Expected<bool> FuseMaskedSoftmax::run(ir::Graph &g, PassContext &) {
  bool changed = false;
  // Forward: Where(mask, -inf, x) read only by a Softmax over the last axis.
  llvm::SmallVector<ir::Node *, 16> fused;
  for (ir::Node *n : g.nodes()) {
    if (!isOnnx(n, "Softmax", 1) || !n->inputs[0])
      continue;
    ir::Value *w = n->inputs[0];
    const ir::Node *where = w->def;
    if (!isOnnx(where, "Where", 3) || w->uses().size() != 1 || g.isOutput(w))
      continue;
    ir::Value *mask = where->inputs[0], *fill = where->inputs[1], *x = where->inputs[2];
    llvm::Optional<double> f = constantScalar(fill);
    if (!mask || !x || mask->dtype != DType::Bool || !f || !std::isinf(*f) ||
        *f > 0 || x->shape != w->shape || x->dtype != w->dtype ||
        !isFloatDType(x->dtype) || !broadcastsByRows(mask->shape, x->shape) ||
        !softmaxOverLastAxis(*n, g.opsetVersion, x->shape.size()))
      continue;
    n->domain = "zinc";
    n->opType = "MaskedSoftmax";
    n->setInputs({x, mask});
    n->attrs = AttributeList();
    g.eraseNode(const_cast<ir::Node *>(where));
    fused.push_back(n);
    changed = true;
  }
  // Backward: Where(mask, 0, SoftmaxGrad(y, dy)) with y a fused softmax of
  // the same mask is its third operand.
  for (ir::Node *sm : fused) {
    ir::Value *y = sm->outputs[0], *mask = sm->inputs[1];
    for (const ir::Use &u : llvm::SmallVector<ir::Use, 4>(y->uses().begin(), y->uses().end())) {
      ir::Node *grad = u.user;
      if (grad->domain != "zinc" || grad->opType != "SoftmaxGrad" || u.operand != 0 ||
          !grad->outputs[0])
        continue;
      ir::Value *dx = grad->outputs[0];
      for (const ir::Use &gu : llvm::SmallVector<ir::Use, 4>(dx->uses().begin(), dx->uses().end())) {
        ir::Node *where = gu.user;
        if (!isOnnx(where, "Where", 3) || gu.operand != 2 || where->inputs[0] != mask ||
            where->outputs[0]->shape != dx->shape || g.isOutput(where->outputs[0]))
          continue;
        llvm::Optional<double> zero = constantScalar(where->inputs[1]);
        if (!zero || *zero != 0.0)
          continue;
        g.replaceAllUsesWith(where->outputs[0], dx);
        g.eraseNode(where);
      }
    }
  }
  if (changed)
    g.eraseDeadValues();
  return changed;
}

std::unique_ptr<Pass> createFuseMaskedSoftmaxPass() {
  return std::make_unique<FuseMaskedSoftmax>();
}

} // namespace zinc::passes
