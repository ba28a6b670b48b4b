//===- FuseBias.cpp - fuse-bias: a linear layer's bias as the GEMM's C ----===//
//
// nn.Linear exports as MatMul(x, W^T) then Add(., b): the Add is a second
// pass over the layer's output. When the product is read only by that Add
// and b is a vector along the output's last axis, the product takes b as a
// third input and starts from it (BLAS's beta = 1: Y = b + op(A) op(B)),
// cuBLASLt's bias epilogue on the GPU. Runs after fold-transposes, so the
// product is often a zinc.FusedMatMul already; a MatMul becomes one.
//
//===----------------------------------------------------------------------===//
#include "zinc/passes/Pass.h"
#include "zinc/support/MatMulGeometry.h"

namespace zinc::passes {
namespace {

class FuseBias : public Pass {
public:
  llvm::StringRef getName() const override { return "Fuse bias into GEMMs"; }
  llvm::StringRef getArgument() const override { return "fuse-bias"; }
  llvm::Expected<bool> run(ir::Graph &g, PassContext &ctx) override;
};

/// A MatMul or a two-input FusedMatMul with one output.
bool isProduct(const ir::Node *n) {
  if (!n || n->inputs.size() != 2 || !n->inputs[0] || !n->inputs[1] ||
      n->outputs.size() != 1 || !n->outputs[0])
    return false;
  return (n->domain.empty() && n->opType == "MatMul") ||
         (n->domain == "zinc" && n->opType == "FusedMatMul");
}

} // namespace

llvm::Expected<bool> FuseBias::run(ir::Graph &g, PassContext &) {
  bool changed = false;
  for (ir::Node *add : g.nodes()) {
    if (!add->domain.empty() || add->opType != "Add" || add->inputs.size() != 2 ||
        add->outputs.size() != 1 || !add->outputs[0])
      continue;
    for (unsigned i = 0; i < 2; ++i) {
      ir::Value *prod = add->inputs[i], *bias = add->inputs[1 - i];
      if (!prod || !bias || !isProduct(prod->def) || prod->uses().size() != 1 ||
          g.isOutput(prod))
        continue;
      const ir::Value *out = add->outputs[0];
      if (out->shape != prod->shape || out->shape.empty() ||
          bias->dtype != prod->dtype || !isFloatDType(prod->dtype) ||
          bias->shape.size() != 1 || bias->shape[0] != out->shape.back())
        continue;
      ir::Node *p = prod->def;
      // A 1-D right operand drops the product's last axis: the bias would
      // not run along the GEMM's columns.
      auto geometry = fusedMatMulGeometry(p->inputs[0]->shape, p->inputs[1]->shape, p->attrs);
      if (!geometry) {
        llvm::consumeError(geometry.takeError());
        continue;
      }
      if (p->inputs[1]->shape.size() < 2 || geometry->n != bias->shape[0])
        continue;
      // The Add becomes the product with the bias, in the Add's place (the
      // bias is defined before it), and the product goes.
      add->domain = "zinc";
      add->opType = "FusedMatMul";
      add->attrs = p->attrs;
      add->setInputs({p->inputs[0], p->inputs[1], bias});
      g.eraseNode(p);
      changed = true;
      break;
    }
  }
  if (changed)
    g.eraseDeadValues();
  return changed;
}

std::unique_ptr<Pass> createFuseBiasPass() { return std::make_unique<FuseBias>(); }

} // namespace zinc::passes
