//===- FuseRmsNorm.cpp - fuse-rms-norm: RMSNorm's formula becomes one op ---===//
//
// Opset 17 has no RMSNorm, so Llama-family exports spell it out:
//   x * (1 / Sqrt(ReduceMean(Pow(x, 2), axes=[-1]) + eps))
// six nodes forward (the reciprocal also as Reciprocal, the square also as
// Mul(x, x)) and a dozen once autodiff has run, each a pass over the
// activation. This pass runs before build-training and makes the chain one
// zinc.RmsNorm {epsilon} over the last axis, whose gradient is one
// zinc.RmsNormGrad. The norm's weight stays the Mul after it, so its
// gradient is the ordinary one. Intermediates read elsewhere leave the chain
// alone.
//
//===----------------------------------------------------------------------===//
#include "compiler/passes/FusionPatterns.h"
#include "zinc/passes/Pass.h"
#include "zinc/support/DType.h"

namespace zinc::passes {
using namespace fusion;
namespace {

class FuseRmsNorm : public Pass {
public:
  llvm::StringRef getName() const override { return "Fuse RMSNorm formulas"; }
  llvm::StringRef getArgument() const override { return "fuse-rms-norm"; }
  llvm::Expected<bool> run(ir::Graph &g, PassContext &ctx) override;
};

struct RmsNorm {
  ir::Value *x = nullptr;
  double epsilon = 0;
  /// The Mul x * r that becomes the fused node.
  ir::Node *product = nullptr;
  /// What it replaces, last first: the reciprocal, Sqrt, Add, ReduceMean,
  /// the square.
  llvm::SmallVector<ir::Node *, 5> chain;
};

/// Whether ReduceMean `mean` averages over the last axis only, keeping it.
bool overLastAxis(const ir::Node &mean, int64_t rank) {
  if (mean.attrs.getInt("keepdims", 1) != 1 || mean.inputs.size() != 1)
    return false;
  llvm::ArrayRef<int64_t> axes = mean.attrs.getInts("axes");
  return axes.size() == 1 && (axes[0] == -1 || axes[0] == rank - 1);
}

/// The chain whose ReduceMean is `mean`, or None.
llvm::Optional<RmsNorm> match(const ir::Graph &g, const ir::Node &mean) {
  if (!isOp(&mean, "ReduceMean", 1))
    return llvm::None;
  ir::Value *square = mean.inputs[0];
  if (!onlyUser(g, square))
    return llvm::None;
  ir::Value *x = nullptr;
  if (const ir::Node *pow = defOf(square, "Pow", 2))
    x = isConstant(pow->inputs[1], 2.0) ? pow->inputs[0] : nullptr;
  else if (const ir::Node *mul = defOf(square, "Mul", 2))
    x = mul->inputs[0] == mul->inputs[1] ? mul->inputs[0] : nullptr;
  if (!x || !isFloatDType(x->dtype) || x->shape.empty() ||
      !overLastAxis(mean, x->shape.size()))
    return llvm::None;
  const ir::Node *add = onlyUser(g, mean.outputs[0]);
  if (!isOp(add, "Add", 2))
    return llvm::None;
  ir::Value *epsValue = otherThan(add, mean.outputs[0]);
  llvm::Optional<double> epsilon = constantScalar(epsValue);
  if (!epsilon || !(*epsilon >= 0))
    return llvm::None;
  const ir::Node *sqrt = onlyUser(g, add->outputs[0]);
  if (!isOp(sqrt, "Sqrt", 1))
    return llvm::None;
  const ir::Node *inv = onlyUser(g, sqrt->outputs[0]);
  bool reciprocal = isOp(inv, "Reciprocal", 1) ||
                    (isOp(inv, "Div", 2) && inv->inputs[1] == sqrt->outputs[0] &&
                     isConstant(inv->inputs[0], 1.0));
  if (!reciprocal)
    return llvm::None;
  const ir::Node *product = onlyUser(g, inv->outputs[0]);
  if (!isOp(product, "Mul", 2) || otherThan(product, inv->outputs[0]) != x)
    return llvm::None;
  const ir::Value *y = product->outputs[0];
  if (y->shape != x->shape || y->dtype != x->dtype)
    return llvm::None;
  RmsNorm m{x, *epsilon, const_cast<ir::Node *>(product), {}};
  for (const ir::Node *n :
       std::initializer_list<const ir::Node *>{inv, sqrt, add, &mean, square->def})
    m.chain.push_back(const_cast<ir::Node *>(n));
  return m;
}

} // namespace

llvm::Expected<bool> FuseRmsNorm::run(ir::Graph &g, PassContext &) {
  llvm::SmallVector<RmsNorm, 16> matches;
  for (ir::Node *n : g.nodes())
    if (llvm::Optional<RmsNorm> m = match(g, *n))
      matches.push_back(*m);
  for (RmsNorm &m : matches) {
    m.product->opType = "RmsNorm";
    m.product->domain = "zinc";
    m.product->setInputs({m.x});
    AttributeList attrs;
    attrs.set(makeFloatAttr("epsilon", m.epsilon));
    m.product->attrs = std::move(attrs);
    // Each was read by the next alone; none is read once the product is not.
    for (ir::Node *d : m.chain)
      g.eraseNode(d);
  }
  if (!matches.empty())
    g.eraseDeadValues();
  return !matches.empty();
}

std::unique_ptr<Pass> createFuseRmsNormPass() {
  return std::make_unique<FuseRmsNorm>();
}

} // namespace zinc::passes
