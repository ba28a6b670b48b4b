//===- FuseSwiGlu.cpp - fuse-swiglu: Silu(gate) * up becomes one op -------===//
//
// Llama's and Mistral's MLP is down(silu(gate(x)) * up(x)): after fuse-silu,
// a zinc.Silu whose only reader is a Mul by a tensor of the same shape.
// Unfused, forward writes the activation and reads it back for the product,
// and autodiff adds the product's two Muls and SiluGrad, each a pass over
// the [tokens, intermediate] tensors, the widest of the model. This pass
// runs after fuse-silu and before build-training and makes the pair one
// zinc.SwiGlu(gate, up), whose gradient is one zinc.SwiGluGrad giving both
// operands' gradients. A product that broadcasts, or a Silu read elsewhere,
// is left alone.
//
//===----------------------------------------------------------------------===//
#include "compiler/passes/FusionPatterns.h"
#include "zinc/passes/Pass.h"
#include "zinc/support/DType.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace zinc::passes {
using namespace fusion;
namespace {

class FuseSwiGlu : public Pass {
public:
  llvm::StringRef getName() const override { return "Fuse SwiGLU products"; }
  llvm::StringRef getArgument() const override { return "fuse-swiglu"; }
  llvm::Expected<bool> run(ir::Graph &g, PassContext &ctx) override;
};

/// The Mul silu(gate) * up that reads zinc.Silu node `silu`'s output alone,
/// with up of gate's type and shape.
ir::Node *gatedProduct(const ir::Graph &g, const ir::Node &silu) {
  if (silu.domain != "zinc" || silu.opType != "Silu" ||
      silu.inputs.size() != 1 || silu.outputs.size() != 1 || !silu.inputs[0] ||
      !silu.outputs[0])
    return nullptr;
  const ir::Value *gate = silu.inputs[0], *act = silu.outputs[0];
  const ir::Node *mul = onlyUser(g, act);
  if (!isOp(mul, "Mul", 2))
    return nullptr;
  const ir::Value *up = otherThan(mul, act);
  // silu(gate) * silu(gate) is no gated unit.
  if (!up || up == act || up->dtype != gate->dtype || up->shape != gate->shape)
    return nullptr;
  const ir::Value *y = mul->outputs[0];
  if (y->shape != gate->shape || y->dtype != gate->dtype)
    return nullptr;
  return const_cast<ir::Node *>(mul);
}

} // namespace

llvm::Expected<bool> FuseSwiGlu::run(ir::Graph &g, PassContext &) {
  llvm::SmallVector<std::pair<ir::Node *, ir::Node *>, 16> matches;
  // silu(a) * silu(b) matches from both sides: the product is fused once.
  llvm::SmallPtrSet<ir::Node *, 16> products;
  for (ir::Node *n : g.nodes())
    if (ir::Node *mul = gatedProduct(g, *n))
      if (products.insert(mul).second)
        matches.push_back({n, mul});
  for (auto &[silu, mul] : matches) {
    ir::Value *gate = silu->inputs[0];
    ir::Value *up = otherThan(mul, silu->outputs[0]);
    mul->opType = "SwiGlu";
    mul->domain = "zinc";
    mul->setInputs({gate, up});
    mul->attrs = AttributeList();
    g.eraseNode(silu);
  }
  if (!matches.empty())
    g.eraseDeadValues();
  return !matches.empty();
}

std::unique_ptr<Pass> createFuseSwiGluPass() {
  return std::make_unique<FuseSwiGlu>();
}

} // namespace zinc::passes
