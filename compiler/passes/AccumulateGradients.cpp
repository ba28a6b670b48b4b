//===- AccumulateGradients.cpp - accumulate-gradients: N micro-batches ----===//
//
// --grad-accum=N: the plan is run N times per optimizer step, once per
// micro-batch, and the update sees the sum of their gradients. Each update's
// gradient gets an f32 accumulator (a State "<param>.grad_accum" of the shape
// the update reads) and a zinc.AccumulateGrad right where the gradient is
// complete, which stores it in the first micro-batch and adds it in the
// others; the update then reads the accumulator. build-training already
// seeded each micro-batch's loss gradient with 1/N, so the sum is the
// gradient of the mean loss, as `(loss / N).backward()` per micro-batch.
//
// The pass runs after partition: the accumulator has the shape of what the
// update reads, this rank's shard under ZeRO stages 1-3 (the gradients are
// reduced every micro-batch, so no rank ever holds a whole model's f32
// gradient sum), the whole all-reduced gradient at stage 0. Which
// instructions run only in the last micro-batch (the updates and what only
// they need) is decided when the plan is emitted (UpdatePhase.h).
//
// With --grad-reduce=step (ZeRO stages 2-3) a reduce-scattered gradient is
// summed whole instead: its accumulator has the gradient's full shape, the
// AccumulateGrad comes before the ReduceScatter, and the ReduceScatter reads
// the accumulator. Only the update reads its shard, so the collective runs
// once per step, in the last micro-batch: 1/N of the collective traffic, for
// a whole f32 gradient sum on every rank.
//
//===----------------------------------------------------------------------===//
#include "zinc/passes/LastWriter.h"
#include "zinc/passes/OptimizerOps.h"
#include "zinc/passes/Pass.h"
#include "zinc/support/Error.h"
#include "llvm/ADT/DenseMap.h"

namespace zinc::passes {
namespace {

class AccumulateGradients : public Pass {
public:
  llvm::StringRef getName() const override { return "Accumulate Gradients"; }
  llvm::StringRef getArgument() const override { return "accumulate-gradients"; }
  bool isEnabled(const PassContext &ctx) const override {
    return ctx.training.mode == CompileMode::Train && ctx.training.gradAccum > 1;
  }
  llvm::Expected<bool> run(ir::Graph &g, PassContext &ctx) override;
};

llvm::Expected<bool> AccumulateGradients::run(ir::Graph &g, PassContext &ctx) {
  if (ctx.memory.delayUpdates)
    return makeError("--grad-accum cannot be combined with --dpu: a delayed update would "
                     "apply a step's accumulated gradients while the next step's "
                     "micro-batches add into them");
  llvm::DenseMap<const ir::Node *, size_t> ordinal;
  std::vector<ir::Node *> updates;
  for (ir::Node *n : g.nodes()) {
    ordinal[n] = ordinal.size();
    if (isOptimizerNode(*n))
      updates.push_back(n);
  }
  if (updates.empty())
    return makeError("--grad-accum: the graph has no optimizer update to accumulate "
                     "gradients for (run build-training first)");
  const bool reduceOncePerStep =
      ctx.training.gradReduce == TrainingOptions::GradReduce::Step;
  // Several updates may read one gradient value: one accumulator for it.
  llvm::DenseMap<ir::Value *, ir::Value *> accumulatorOf;
  // An accumulator for `grad`, added into after its last writer before
  // `reader`.
  auto accumulatorFor = [&](ir::Value *grad, ir::Node *reader,
                            ir::Value *param) -> ir::Value * {
    ir::Value *&acc = accumulatorOf[grad];
    if (acc)
      return acc;
    acc = g.addValue(g.uniqueValueName(param->name + ".grad_accum"), DType::F32,
                     grad->shape, ir::ValueRole::State);
    acc->shardOf = grad->shardOf;
    ir::Node *done = lastWriterBefore(grad, reader, ordinal);
    ir::Node *at = done ? g.nextNode(done) : g.firstNode();
    g.insertNode(at, "AccumulateGrad", g.uniqueNodeName(param->name + "/grad_accum"),
                 {acc, grad}, {}, {}, "zinc");
    return acc;
  };
  bool reducedOnce = false;
  for (ir::Node *update : updates) {
    ir::Value *grad = update->inputs[1];
    if (!grad)
      return makeError("--grad-accum: " + update->describe() + " has no gradient");
    ir::Value *param = update->inputs[0];
    ir::Node *reduce = reduceOncePerStep ? lastWriterBefore(grad, update, ordinal) : nullptr;
    if (reduce && reduce->domain == "zinc" && reduce->opType == "ReduceScatter" &&
        reduce->inputs.size() == 1 && reduce->inputs[0] && reduce->outputs.size() == 1) {
      // The whole gradient is summed; its shard, reduced from the f32 sum,
      // is what the update reads.
      reduce->setInput(0, accumulatorFor(reduce->inputs[0], reduce, param));
      grad->dtype = DType::F32;
      reducedOnce = true;
      continue;
    }
    update->setInput(1, accumulatorFor(grad, update, param));
  }
  if (reduceOncePerStep && !reducedOnce)
    return makeError("--grad-reduce=step reduce-scatters each gradient once per step: it "
                     "needs a plan whose gradients are reduce-scattered (--ranks above 1 "
                     "with --zero-stage=2 or 3)");
  return true;
}

} // namespace

std::unique_ptr<Pass> createAccumulateGradientsPass() {
  return std::make_unique<AccumulateGradients>();
}

} // namespace zinc::passes
