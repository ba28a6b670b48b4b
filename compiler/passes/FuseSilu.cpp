//===- FuseSilu.cpp - fuse-silu: x * Sigmoid(x) becomes one zinc.Silu ------===//
//
// ONNX has no SiLU: PyTorch exports nn.SiLU and F.silu (Llama's and
// Mistral's SwiGLU gate, EfficientNet's activation) as Mul(x, Sigmoid(x)).
// Two passes over the activation forward and, after autodiff, four more
// (Sigmoid's and Mul's gradients), where PyTorch runs one fused silu and
// one silu_backward. This pass runs before build-training and makes the
// pair one zinc.Silu, whose gradient is the single zinc.SiluGrad. The
// Sigmoid's output must be read by the product alone, and the product must
// not broadcast.
//
//===----------------------------------------------------------------------===//
#include "zinc/passes/Pass.h"
#include "zinc/support/DType.h"

namespace zinc::passes {
namespace {

class FuseSilu : public Pass {
public:
  llvm::StringRef getName() const override { return "Fuse SiLU products"; }
  llvm::StringRef getArgument() const override { return "fuse-silu"; }
  llvm::Expected<bool> run(ir::Graph &g, PassContext &ctx) override;
};

/// The Mul that multiplies Sigmoid node `sig`'s input by its output, when
/// the product reads the Sigmoid's output alone and keeps x's type.
ir::Node *siluProduct(const ir::Graph &g, const ir::Node &sig) {
  if (!sig.domain.empty() || sig.opType != "Sigmoid" || sig.inputs.size() != 1 ||
      sig.outputs.size() != 1 || !sig.inputs[0] || !sig.outputs[0])
    return nullptr;
  const ir::Value *x = sig.inputs[0], *s = sig.outputs[0];
  if (!isFloatDType(x->dtype) || g.isOutput(s) || s->uses().size() != 1)
    return nullptr;
  ir::Node *mul = s->uses()[0].user;
  if (!mul->domain.empty() || mul->opType != "Mul" || mul->inputs.size() != 2 ||
      mul->outputs.size() != 1 || !mul->outputs[0])
    return nullptr;
  bool pair = (mul->inputs[0] == x && mul->inputs[1] == s) ||
              (mul->inputs[0] == s && mul->inputs[1] == x);
  const ir::Value *y = mul->outputs[0];
  if (!pair || y->shape != x->shape || y->dtype != x->dtype)
    return nullptr;
  return mul;
}

} // namespace

llvm::Expected<bool> FuseSilu::run(ir::Graph &g, PassContext &) {
  llvm::SmallVector<std::pair<ir::Node *, ir::Node *>, 16> matches;
  for (ir::Node *n : g.nodes())
    if (ir::Node *mul = siluProduct(g, *n))
      matches.push_back({n, mul});
  for (auto &[sig, mul] : matches) {
    ir::Value *x = sig->inputs[0];
    mul->opType = "Silu";
    mul->domain = "zinc";
    mul->setInputs({x});
    mul->attrs = AttributeList();
    g.eraseNode(sig);
  }
  if (!matches.empty())
    g.eraseDeadValues();
  return !matches.empty();
}

std::unique_ptr<Pass> createFuseSiluPass() {
  return std::make_unique<FuseSilu>();
}

} // namespace zinc::passes
