//===- ClipGradNorm.cpp - clip-grad-norm: clip_grad_norm_ before the update -===//
//
// --clip-grad-norm=MAX: every trained gradient is multiplied by
// min(1, MAX / (norm + 1e-6)) before its update, norm the 2-norm over all
// of them, as torch.nn.utils.clip_grad_norm_(params, MAX) between backward
// and optimizer.step() does (after GradScaler.unscale_ under fp16 loss
// scaling; a step skipped for an overflow stays skipped).
//
// The pass runs after partition, so it sees each gradient as its update
// reads it: whole (one rank, or ZeRO stage 0 after the all-reduce), or this
// rank's shard of the reduced gradient (stages 1-3; a shard's padding is
// zero). One SumGradSquares node per gradient, right where that gradient is
// complete, adds its squares (unscaled under fp16 loss scaling, as
// GradScaler.unscale_ comes first) into one f32 state (the first node sets it), as
// loss scaling's overflow checks do: a gradient is read once, where it is
// made, and may leave the GPU at once, whatever tier its update runs in.
// With sharded gradients each rank holds a part of the sum, so an AllReduce
// adds the parts before the first update. Every update reads the sum as one
// more operand (OptimizerExtra::GradSumSquares) and derives the coefficient
// itself (zinc/support/GradClipping.h): no node has to wait for all
// gradients and then touch each of them again.
//
// With delayed updates (--dpu) the sum is stored with the delayed gradients
// (DelayedUpdate.cpp), so an update applies the previous step's gradients
// clipped by their own norm.
//
//===----------------------------------------------------------------------===//
#include "zinc/passes/LastWriter.h"
#include "zinc/passes/OptimizerOps.h"
#include "zinc/passes/Pass.h"
#include "zinc/support/Error.h"
#include "llvm/ADT/DenseMap.h"

namespace zinc::passes {
namespace {

class ClipGradNorm : public Pass {
public:
  llvm::StringRef getName() const override { return "Clip Gradient Norm"; }
  llvm::StringRef getArgument() const override { return "clip-grad-norm"; }
  bool isEnabled(const PassContext &ctx) const override {
    return ctx.training.mode == CompileMode::Train && ctx.training.clipGradNorm > 0;
  }
  llvm::Expected<bool> run(ir::Graph &g, PassContext &ctx) override;
};

llvm::Expected<bool> ClipGradNorm::run(ir::Graph &g, PassContext &ctx) {
  llvm::DenseMap<const ir::Node *, size_t> ordinal;
  std::vector<ir::Node *> updates;
  for (ir::Node *n : g.nodes()) {
    ordinal[n] = ordinal.size();
    if (isOptimizerNode(*n))
      updates.push_back(n);
  }
  if (updates.empty())
    return makeError("--clip-grad-norm: the graph has no optimizer update to clip "
                     "(run build-training first)");

  ir::Value *sum = g.addValue(g.uniqueValueName("grad_norm.sum_squares"), DType::F32, {},
                              ir::ValueRole::State);
  // Gradients in the order they complete, so the first check (which sets
  // the sum) runs before the others; checks after one node keep that order.
  std::vector<std::pair<size_t, ir::Node *>> byCompletion;
  for (ir::Node *update : updates) {
    ir::Node *done = lastWriterBefore(update->inputs[1], update, ordinal);
    byCompletion.push_back({done ? ordinal.lookup(done) + 1 : 0, update});
  }
  llvm::stable_sort(byCompletion, [](const auto &a, const auto &b) { return a.first < b.first; });
  llvm::DenseMap<const ir::Node *, ir::Node *> lastCheckAfter;
  bool first = true;
  for (auto &[position, update] : byCompletion) {
    ir::Value *grad = update->inputs[1];
    ir::Node *done = lastWriterBefore(grad, update, ordinal);
    ir::Node *after = done ? lastCheckAfter.lookup(done) : nullptr;
    if (!after)
      after = done;
    ir::Node *at = after ? g.nextNode(after) : g.firstNode();
    AttributeList attrs;
    if (!first)
      attrs.set(makeIntAttr("accumulate", 1));
    first = false;
    unsigned scaleSlot = optimizerExtraOperand(*update, OptimizerExtra::LossScale);
    ir::Value *scale = scaleSlot < update->inputs.size() ? update->inputs[scaleSlot] : nullptr;
    ir::Node *check = g.insertNode(at, "SumGradSquares",
                                   g.uniqueNodeName("grad_norm/sum_squares/" + grad->name),
                                   {sum, scale, grad}, {}, std::move(attrs), "zinc");
    if (done)
      lastCheckAfter[done] = check;
  }

  // Stages 1-3 update shards: each rank's sum covers its own.
  bool sharded = g.ranks > 1 && llvm::any_of(updates, [](const ir::Node *u) {
    return !u->inputs[1]->shardOf.empty();
  });
  if (sharded) {
    if (!llvm::all_of(updates, [](const ir::Node *u) { return !u->inputs[1]->shardOf.empty(); }))
      return makeError("--clip-grad-norm: some updates read whole gradients and some "
                       "shards; the sum of squares cannot be reduced over ranks");
    AttributeList op;
    op.set(makeStringAttr("op", "sum"));
    ir::Node *reduce = g.insertNode(updates.front(), "AllReduce",
                                    g.uniqueNodeName("grad_norm/allreduce"), {sum}, {},
                                    std::move(op), "zinc");
    reduce->stream = ir::Stream::Collective;
  }

  for (ir::Node *update : updates) {
    unsigned slot = optimizerExtraOperand(*update, OptimizerExtra::GradSumSquares);
    llvm::SmallVector<ir::Value *, 10> operands(update->inputs.begin(), update->inputs.end());
    if (operands.size() > slot)
      return makeError("--clip-grad-norm: " + update->describe() +
                       " already has a gradient norm operand");
    operands.resize(slot, nullptr);
    operands.push_back(sum);
    update->setInputs(operands);
    update->attrs.set(makeFloatAttr("max_grad_norm", ctx.training.clipGradNorm));
  }
  return true;
}

} // namespace

std::unique_ptr<Pass> createClipGradNormPass() { return std::make_unique<ClipGradNorm>(); }

} // namespace zinc::passes
