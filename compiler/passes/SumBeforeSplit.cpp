//===- SumBeforeSplit.cpp - sum-before-split: reduce first, split the sum -===//
//
// A tiled product with a bias gets, from autodiff, the output gradient
// split into the tiles' shares and each share summed over its rows for the
// bias tile's gradient:
//   p_0, ..., p_k = Split(dY, axis a);  db_i = ReduceSum(p_i, axes)
// fold-transposes lets the weight and input gradients read the shares as
// strided views of dY, so these ReduceSums are all that keeps the Split, a
// full copy of dY (for a vocabulary projection, the size of the logits).
// When the summed axes do not include the split axis, summing commutes with
// splitting:
//   s = ReduceSum(dY, axes);  db_0, ..., db_k = Split(s, axis a')
// and the copy goes (dce removes the Split no one reads). a' is a less the
// summed axes before it when keepdims is 0.
//
//===----------------------------------------------------------------------===//
#include "zinc/passes/Pass.h"
#include "autodiff/rules/RuleUtil.h"
#include "llvm/ADT/DenseMap.h"

namespace zinc::passes {
namespace {

class SumBeforeSplit : public Pass {
public:
  llvm::StringRef getName() const override { return "Sum Before Split"; }
  llvm::StringRef getArgument() const override { return "sum-before-split"; }
  llvm::Expected<bool> run(ir::Graph &g, PassContext &ctx) override;
};

/// A ReduceSum's summed axes (non-negative, for an input of rank `rank`)
/// and keepdims; none when they are not constants or sum everything by
/// default.
struct Reduction {
  llvm::SmallVector<int64_t, 4> axes;
  bool keepdims = true;
};

llvm::Optional<Reduction> reductionOf(const ir::Node &r, int64_t rank) {
  if (!r.domain.empty() || r.opType != "ReduceSum" || r.outputs.size() != 1 || !r.outputs[0])
    return llvm::None;
  Reduction out;
  out.keepdims = r.attrs.getInt("keepdims", 1) != 0;
  if (r.inputs.size() > 1 && r.inputs[1]) {
    auto axes = autodiff::constantInts(r.inputs[1]);
    if (!axes)
      return llvm::None;
    out.axes = *axes;
  } else if (r.attrs.has("axes")) {
    llvm::ArrayRef<int64_t> a = r.attrs.getInts("axes");
    out.axes.assign(a.begin(), a.end());
  }
  if (out.axes.empty())
    return llvm::None; // everything (or nothing, with noop_with_empty_axes)
  for (int64_t &a : out.axes) {
    if (a < 0)
      a += rank;
    if (a < 0 || a >= rank)
      return llvm::None;
  }
  llvm::sort(out.axes);
  return out;
}

} // namespace

llvm::Expected<bool> SumBeforeSplit::run(ir::Graph &g, PassContext &) {
  std::vector<ir::Node *> splits;
  llvm::DenseMap<const ir::Node *, size_t> position;
  for (ir::Node *n : g.nodes()) {
    position[n] = position.size();
    if (n->domain.empty() && n->opType == "Split" && !n->inputs.empty() && n->inputs[0])
      splits.push_back(n);
  }
  bool changed = false;
  for (ir::Node *split : splits) {
    ir::Value *x = split->inputs[0];
    int64_t rank = static_cast<int64_t>(x->shape.size());
    int64_t axis = split->attrs.getInt("axis", 0);
    if (axis < 0)
      axis += rank;
    if (axis < 0 || axis >= rank)
      continue;
    // Every output read only by ReduceSums of one kind, away from the axis.
    llvm::Optional<Reduction> kind;
    ir::Node *firstSum = nullptr;
    llvm::SmallVector<ir::Node *, 8> sums(split->outputs.size(), nullptr);
    bool ok = true;
    for (unsigned i = 0; ok && i < split->outputs.size(); ++i) {
      ir::Value *part = split->outputs[i];
      if (!part || part->uses().size() != 1 || g.isOutput(part)) {
        ok = false;
        break;
      }
      ir::Node *r = part->uses()[0].user;
      auto red = r->inputs[0] == part ? reductionOf(*r, rank) : llvm::None;
      ok = red && !llvm::is_contained(red->axes, axis) &&
           (!kind || (kind->axes == red->axes && kind->keepdims == red->keepdims));
      if (ok) {
        kind = red;
        sums[i] = r;
        if (!firstSum || position.lookup(r) < position.lookup(firstSum))
          firstSum = r;
      }
    }
    if (!ok || !kind)
      continue;
    // The sum of all of x, then split as the parts were.
    llvm::SmallVector<int64_t, 6> summed;
    for (int64_t d = 0; d < rank; ++d)
      if (!llvm::is_contained(kind->axes, d))
        summed.push_back(x->shape[d]);
      else if (kind->keepdims)
        summed.push_back(1);
    int64_t newAxis = axis;
    if (!kind->keepdims)
      newAxis -= llvm::count_if(kind->axes, [&](int64_t a) { return a < axis; });
    // The sum and its split go where the first (in program order) of the
    // parts' sums was: x and the axes are defined there.
    ir::Value *total = g.addValue(g.uniqueValueName(x->name + "@sum"), x->dtype, summed,
                                  ir::ValueRole::Activation);
    g.insertNode(firstSum, "ReduceSum", g.uniqueNodeName(firstSum->name + "/whole"),
                 {x, firstSum->inputs.size() > 1 ? firstSum->inputs[1] : nullptr}, {total},
                 firstSum->attrs);
    llvm::SmallVector<ir::Value *, 8> pieces;
    for (ir::Node *r : sums) {
      ir::Value *out = r->outputs[0];
      pieces.push_back(g.addValue(g.uniqueValueName(out->name + "@split"), out->dtype,
                                  out->shape, ir::ValueRole::Activation));
    }
    AttributeList attrs = split->attrs;
    attrs.set(makeIntAttr("axis", newAxis));
    llvm::SmallVector<ir::Value *, 2> splitInputs = {total};
    if (split->inputs.size() > 1)
      splitInputs.push_back(split->inputs[1]);
    g.insertNode(firstSum, "Split", g.uniqueNodeName(split->name + "/summed"), splitInputs,
                 pieces, std::move(attrs));
    llvm::SmallVector<ir::Value *, 4> outputs(g.outputs().begin(), g.outputs().end());
    for (unsigned i = 0; i < sums.size(); ++i) {
      ir::Value *old = sums[i]->outputs[0];
      g.replaceAllUsesWith(old, pieces[i]);
      std::replace(outputs.begin(), outputs.end(), old, pieces[i]);
      g.eraseNode(sums[i]);
    }
    g.setOutputs(outputs);
    changed = true;
  }
  if (changed)
    g.eraseDeadValues();
  return changed;
}

std::unique_ptr<Pass> createSumBeforeSplitPass() { return std::make_unique<SumBeforeSplit>(); }

} // namespace zinc::passes
