//===- FuseRotary.cpp - fuse-rotary: rotary embeddings become one op ------===//
//
// Llama and GPT-NeoX apply rotary position embeddings to each head as
//   x * cos + rotate_half(x) * sin,  rotate_half(x) = Concat(-x2, x1)
// with x1, x2 the halves of x's last axis (two Slices), cos and sin tables
// broadcast over batch and heads. Exported, that is seven nodes per
// projection, and autodiff adds about as many again (the Muls' products,
// the Concat's Split, a Neg, a zinc.SliceGrad per half and the Adds that
// sum them), each a pass over the head's activation. This pass runs before
// build-training and makes the formula one zinc.Rotary(x, cos, sin), whose
// gradient is one zinc.RotaryGrad(dy, cos, sin). Intermediates read
// elsewhere, halves that are not exactly [0, d/2) and [d/2, d), the other
// rotation (Concat(x1, -x2)) and tables that would widen x leave the
// formula alone.
//
//===----------------------------------------------------------------------===//
#include "autodiff/rules/RuleUtil.h"
#include "compiler/passes/FusionPatterns.h"
#include "zinc/passes/Pass.h"
#include "zinc/support/DType.h"
#include <algorithm>

namespace zinc::passes {
using namespace fusion;
namespace {

class FuseRotary : public Pass {
public:
  llvm::StringRef getName() const override { return "Fuse rotary embeddings"; }
  llvm::StringRef getArgument() const override { return "fuse-rotary"; }
  llvm::Expected<bool> run(ir::Graph &g, PassContext &ctx) override;
};

struct Rotary {
  ir::Value *x = nullptr, *cos = nullptr, *sin = nullptr;
  /// The Add that becomes the fused node.
  ir::Node *sum = nullptr;
  /// What it replaces, each read only by the one before it: the two Muls,
  /// the Concat, the Neg, the Slices.
  llvm::SmallVector<ir::Node *, 6> chain;
};

/// Whether `n` is a Slice of the last axis of its data, with step 1, taking
/// exactly [begin, end) of it; its data in `data`.
bool slicesLastAxis(const ir::Node *n, int64_t begin, int64_t end,
                    ir::Value *&data) {
  if (!n || !n->domain.empty() || n->opType != "Slice" ||
      n->inputs.size() < 3 || n->outputs.size() != 1 || !n->inputs[0])
    return false;
  data = n->inputs[0];
  int64_t rank = data->shape.size();
  if (rank == 0)
    return false;
  int64_t dim = data->shape.back();
  auto starts = autodiff::constantInts(n->inputs[1]);
  auto ends = autodiff::constantInts(n->inputs[2]);
  if (!starts || !ends || starts->size() != 1 || ends->size() != 1)
    return false;
  int64_t axis = 0; // ONNX: axes default to [0, len(starts))
  if (n->inputs.size() > 3 && n->inputs[3]) {
    auto axes = autodiff::constantInts(n->inputs[3]);
    if (!axes || axes->size() != 1)
      return false;
    axis = (*axes)[0] < 0 ? (*axes)[0] + rank : (*axes)[0];
  }
  if (axis != rank - 1)
    return false;
  if (n->inputs.size() > 4 && n->inputs[4]) {
    auto steps = autodiff::constantInts(n->inputs[4]);
    if (!steps || steps->size() != 1 || (*steps)[0] != 1)
      return false;
  }
  // ONNX's clamping of a positive-step range (INT64_MAX for "to the end").
  auto clamp = [dim](int64_t v) {
    if (v < 0)
      v = v < -dim ? 0 : v + dim;
    return std::min(v, dim);
  };
  return clamp((*starts)[0]) == begin && clamp((*ends)[0]) == end;
}

/// The formula whose Concat is `concat`, or None.
llvm::Optional<Rotary> match(const ir::Graph &g, const ir::Node &concat) {
  if (!isOp(&concat, "Concat", 2))
    return llvm::None;
  const ir::Value *rot = concat.outputs[0];
  int64_t rank = rot->shape.size();
  int64_t axis = concat.attrs.getInt("axis", 0);
  if (rank == 0 || (axis < 0 ? axis + rank : axis) != rank - 1)
    return llvm::None;
  const ir::Node *neg = defOf(concat.inputs[0], "Neg", 1);
  if (!neg || onlyUser(g, neg->outputs[0]) != &concat ||
      onlyUser(g, concat.inputs[1]) != &concat)
    return llvm::None;
  const ir::Value *upper = neg->inputs[0];
  if (onlyUser(g, upper) != neg)
    return llvm::None;
  int64_t d = rot->shape.back();
  if (d <= 0 || d % 2)
    return llvm::None;
  ir::Value *x = nullptr, *x2 = nullptr;
  const ir::Node *lowSlice = concat.inputs[1]->def, *highSlice = upper->def;
  if (!slicesLastAxis(lowSlice, 0, d / 2, x) ||
      !slicesLastAxis(highSlice, d / 2, d, x2) || x != x2 ||
      x->shape != rot->shape || x->dtype != rot->dtype ||
      !isFloatDType(x->dtype))
    return llvm::None;
  const ir::Node *mulSin = onlyUser(g, rot);
  if (!isOp(mulSin, "Mul", 2))
    return llvm::None;
  ir::Value *sin = otherThan(mulSin, rot);
  const ir::Node *sum = onlyUser(g, mulSin->outputs[0]);
  if (!isOp(sum, "Add", 2))
    return llvm::None;
  const ir::Value *cosProduct = otherThan(sum, mulSin->outputs[0]);
  const ir::Node *mulCos = defOf(cosProduct, "Mul", 2);
  if (!mulCos || onlyUser(g, cosProduct) != sum)
    return llvm::None;
  ir::Value *cos = otherThan(mulCos, x);
  // The tables broadcast to x, never x to them: every product keeps x's shape.
  if (!sin || !cos || sin == rot || cos->shape != sin->shape ||
      cos->dtype != x->dtype || sin->dtype != x->dtype ||
      cos->shape.size() > x->shape.size())
    return llvm::None;
  for (const ir::Node *n : {mulSin, mulCos, sum})
    if (n->outputs[0]->shape != x->shape || n->outputs[0]->dtype != x->dtype)
      return llvm::None;
  Rotary m{x, cos, sin, const_cast<ir::Node *>(sum), {}};
  for (const ir::Node *n : {mulSin, mulCos, &concat, neg, lowSlice, highSlice})
    m.chain.push_back(const_cast<ir::Node *>(n));
  return m;
}

} // namespace

llvm::Expected<bool> FuseRotary::run(ir::Graph &g, PassContext &) {
  llvm::SmallVector<Rotary, 16> matches;
  for (ir::Node *n : g.nodes())
    if (llvm::Optional<Rotary> m = match(g, *n))
      matches.push_back(*m);
  for (Rotary &m : matches) {
    m.sum->opType = "Rotary";
    m.sum->domain = "zinc";
    m.sum->setInputs({m.x, m.cos, m.sin});
    m.sum->attrs = AttributeList();
    for (ir::Node *d : m.chain)
      g.eraseNode(d);
  }
  if (!matches.empty())
    g.eraseDeadValues();
  return !matches.empty();
}

std::unique_ptr<Pass> createFuseRotaryPass() {
  return std::make_unique<FuseRotary>();
}

} // namespace zinc::passes
