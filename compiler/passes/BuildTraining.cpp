//===- BuildTraining.cpp - build-training: autodiff + optimizer update ----===//
//
// Turns a forward graph into one training step: picks the loss and the
// trainable parameters, appends the backward graph by reverse-mode autodiff
// (one rule per op type, its Gradient column in Ops.def), and appends one
// optimizer-update node per parameter, which later passes may move to the
// host. Gradient work is emitted only for values on a path from a trainable
// parameter to the loss. Training-mode Dropouts get their seeded form first
// (DropoutLowering.h).
//
//===----------------------------------------------------------------------===//
#include "zinc/passes/DropoutLowering.h"
#include "zinc/passes/LossOutput.h"
#include "zinc/passes/ModelStateUpdates.h"
#include "zinc/passes/Pass.h"
#include "zinc/passes/autodiff/GradientRules.h"
#include "zinc/support/Error.h"
#include "zinc/support/Float16.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/Regex.h"
#include <cstring>

namespace zinc::passes {
namespace {

class BuildTraining : public Pass {
public:
  llvm::StringRef getName() const override { return "Build Training Step"; }
  llvm::StringRef getArgument() const override { return "build-training"; }
  bool isEnabled(const PassContext &ctx) const override {
    return ctx.training.mode == CompileMode::Train;
  }
  llvm::Expected<bool> run(ir::Graph &g, PassContext &ctx) override;
};

/// Sums gradient contributions of one value as they arrive.
class GradientMap {
public:
  explicit GradientMap(ir::Graph &g) : g(g) {}
  ir::Value *get(const ir::Value *v) const { return grads.lookup(v); }
  void accumulate(const ir::Value *v, ir::Value *grad, const ir::Node &from) {
    ir::Value *&slot = grads[v];
    if (!slot) {
      slot = grad;
      return;
    }
    // A parameter's "<name>.grad" is its whole gradient (the output of a
    // step without optimizer is found by that name): partial sums of a
    // parameter's gradient are named apart.
    std::string name = g.uniqueValueName(
        v->name + (v->role == ir::ValueRole::Parameter ? ".grad_partial" : ".grad"));
    ir::Value *sum = g.addValue(name, grad->dtype, grad->shape,
                                ir::ValueRole::Activation);
    g.addNode("Add", g.uniqueNodeName(from.name + "/grad/accumulate_" + llvm::utostr(count++)),
              {slot, grad}, {sum});
    slot = sum;
  }

private:
  ir::Graph &g;
  llvm::DenseMap<const ir::Value *, ir::Value *> grads;
  unsigned count = 0;
};

/// The gradient of the loss, 1, or 1/N with N micro-batches per update (as
/// `(loss / N).backward()` seeds it): a Constant of the loss's type whose
/// value is named "<loss>.grad", the name mixed-precision finds it by to
/// seed it with the loss scale (divided by N) instead.
ir::Value *appendLossGradSeed(ir::Graph &g, const ir::Value &loss, int64_t microBatches) {
  TensorData one;
  one.dtype = loss.dtype;
  one.shape.assign(loss.shape.begin(), loss.shape.end()); // one element
  one.bytes.resize(dtypeSize(loss.dtype));
  auto put = [&](auto v) { std::memcpy(one.bytes.data(), &v, sizeof(v)); };
  // 1 / N in the loss's type, as PyTorch divides a float loss by N.
  const float seedF = 1.0f / static_cast<float>(microBatches);
  switch (loss.dtype) {
  case DType::F64: put(1.0 / static_cast<double>(microBatches)); break;
  case DType::F16: put(floatToHalf(seedF)); break;
  case DType::BF16: put(floatToBf16(seedF)); break;
  default: put(seedF); break; // findLossOutput admits float losses only
  }
  Attribute value;
  value.name = "value";
  value.kind = AttrKind::Tensor;
  value.tensor = std::move(one);
  AttributeList attrs;
  attrs.set(std::move(value));
  ir::Value *seed = g.addValue(g.uniqueValueName(loss.name + ".grad"), loss.dtype,
                               loss.shape, ir::ValueRole::Activation);
  g.addNode("Constant", g.uniqueNodeName(loss.def->name + "/grad/seed"), {}, {seed},
            std::move(attrs));
  return seed;
}

/// One in-place update node per parameter, with its zero-initialised state.
void appendOptimizer(ir::Graph &g, const TrainingOptions &opts, ir::Value *param,
                     ir::Value *grad) {
  auto state = [&](llvm::StringRef suffix) {
    return g.addValue(g.uniqueValueName(param->name + "." + suffix.str()),
                      DType::F32, param->shape, ir::ValueRole::State);
  };
  AttributeList attrs;
  attrs.set(makeFloatAttr("lr", opts.lr));
  attrs.set(makeFloatAttr("weight_decay", opts.weightDecay));
  // Only a schedule given is written: a constant rate's plan stays as it was.
  const LrSchedule &schedule = opts.lrSchedule;
  if (schedule.kind != LrScheduleKind::Constant || schedule.warmupSteps) {
    attrs.set(makeStringAttr(
        "lr_schedule", schedule.kind == LrScheduleKind::Linear   ? "linear"
                       : schedule.kind == LrScheduleKind::Cosine ? "cosine"
                                                                 : "constant"));
    attrs.set(makeIntAttr("warmup_steps", schedule.warmupSteps));
    if (schedule.kind != LrScheduleKind::Constant)
      attrs.set(makeIntAttr("total_steps", schedule.totalSteps));
  }
  switch (opts.optimizer) {
  case OptimizerKind::AdamW:
  case OptimizerKind::Adam: {
    attrs.set(makeFloatAttr("beta1", opts.beta1));
    attrs.set(makeFloatAttr("beta2", opts.beta2));
    attrs.set(makeFloatAttr("eps", opts.eps));
    bool decoupled = opts.optimizer == OptimizerKind::AdamW;
    llvm::StringRef op = decoupled ? "AdamW" : "Adam";
    g.addNode(op, param->name + "/" + op.lower(),
              {param, grad, state("exp_avg"), state("exp_avg_sq")}, {},
              std::move(attrs), "zinc");
    return;
  }
  case OptimizerKind::None: {
    std::string name = (param->init ? param->init->name : param->name) + ".grad";
    ir::Value *out = grad;
    if (grad->name != name) {
      out = g.addValue(g.uniqueValueName(name), grad->dtype, grad->shape,
                       ir::ValueRole::Activation);
      g.addNode("Identity", g.uniqueNodeName(name), {grad}, {out});
    }
    g.addOutput(out);
    return;
  }
  case OptimizerKind::SGD: {
    attrs.set(makeFloatAttr("momentum", opts.momentum));
    attrs.set(makeFloatAttr("dampening", opts.dampening));
    attrs.set(makeIntAttr("nesterov", opts.nesterov ? 1 : 0));
    llvm::SmallVector<ir::Value *, 3> operands{param, grad};
    if (opts.momentum != 0)
      operands.push_back(state("momentum_buffer"));
    g.addNode("SGD", param->name + "/sgd", operands, {}, std::move(attrs), "zinc");
    return;
  }
  }
}

llvm::Expected<bool> BuildTraining::run(ir::Graph &g, PassContext &ctx) {
  const TrainingOptions &opts = ctx.training;
  auto loss = findLossOutput(g, opts.loss);
  if (!loss)
    return loss.takeError();
  // Dropout in training mode becomes the seeded training form (a ratio of
  // 0 the identity) before anything reads the forward graph.
  if (auto lowered = lowerDropouts(g, /*training=*/true); !lowered)
    return lowered.takeError();

  llvm::Optional<llvm::Regex> freeze;
  if (!opts.freeze.empty()) {
    freeze.emplace(opts.freeze);
    std::string why;
    if (!freeze->isValid(why))
      return makeError("--freeze: invalid regex '" + opts.freeze + "': " + why);
  }
  auto frozen = [&](const ir::Value *v) {
    return freeze && freeze->match(v->init ? v->init->name : v->name);
  };
  // BatchNorm running statistics are model state: updated in place by the
  // step (below the forward node that computes them), never trained.
  if (auto updated = appendModelStateUpdates(g); !updated)
    return updated.takeError();

  // Forward: values that depend on a trainable parameter through ops that
  // carry gradient.
  llvm::DenseSet<const ir::Value *> dependsOnParam;
  for (const auto &v : g.values())
    if (v->role == ir::ValueRole::Parameter && isFloatDType(v->dtype) && !frozen(v.get()))
      dependsOnParam.insert(v.get());
  std::vector<ir::Node *> forward;
  for (const auto &n : g.nodes())
    forward.push_back(n);
  for (ir::Node *n : forward) {
    const autodiff::GradientRule *rule = autodiff::lookupGradientRule(n->opType);
    if (rule && rule->kind == autodiff::RuleKind::ZeroGradient)
      continue;
    if (llvm::any_of(n->inputs, [&](const ir::Value *v) { return dependsOnParam.count(v); }))
      for (ir::Value *out : n->outputs)
        if (out && isFloatDType(out->dtype))
          dependsOnParam.insert(out);
  }
  // Backward: values the loss depends on.
  llvm::DenseSet<const ir::Value *> reachesLoss{*loss};
  for (ir::Node *n : llvm::reverse(forward))
    if (llvm::any_of(n->outputs, [&](const ir::Value *v) { return reachesLoss.count(v); }))
      for (ir::Value *in : n->inputs)
        if (in)
          reachesLoss.insert(in);
  auto needsGrad = [&](const ir::Value *v) {
    return v && dependsOnParam.count(v) && reachesLoss.count(v);
  };

  std::vector<ir::Value *> trainable;
  for (const auto &v : g.values())
    if (v->role == ir::ValueRole::Parameter && needsGrad(v.get()))
      trainable.push_back(v.get());
  if (trainable.empty())
    return makeError("nothing to train: no unfrozen float initializer reaches "
                     "the loss '" + (*loss)->name + "'");

  GradientMap grads(g);
  grads.accumulate(*loss, appendLossGradSeed(g, **loss, opts.gradAccum), *(*loss)->def);

  for (ir::Node *n : llvm::reverse(forward)) {
    llvm::SmallVector<ir::Value *, 4> outGrads;
    for (ir::Value *out : n->outputs)
      outGrads.push_back(out ? grads.get(out) : nullptr);
    llvm::SmallVector<bool, 4> needs;
    for (ir::Value *in : n->inputs)
      needs.push_back(needsGrad(in));
    if (llvm::none_of(outGrads, [](ir::Value *v) { return v; }) ||
        llvm::none_of(needs, [](bool b) { return b; }))
      continue;
    const autodiff::GradientRule *rule = autodiff::lookupGradientRule(n->opType);
    // zinc-domain ops reach autodiff only from the fusions before it
    // (fuse-silu); their rules are Ops.def's Gradient column too, and no zinc
    // op is named like an ONNX op.
    if (!rule || (!n->domain.empty() && n->domain != "zinc"))
      return makeError(n->describe() + ": no gradient rule for op '" + n->opType +
                       "' (freeze the parameters before it with --freeze)");
    if (rule->kind == autodiff::RuleKind::ZeroGradient)
      continue;
    if (rule->kind == autodiff::RuleKind::NotDifferentiable)
      return makeError(n->describe() + ": op '" + n->opType +
                       "' is not differentiable, but a trainable parameter's "
                       "gradient flows through it");
    autodiff::GradientBuilder builder(g, *n, outGrads, needs);
    if (auto err = rule->fn(builder))
      return addContext(std::move(err), n->describe());
    for (unsigned i = 0; i < n->inputs.size(); ++i) {
      if (!needs[i])
        continue;
      ir::Value *dx = builder.inputGrads()[i];
      if (!dx)
        return makeError(n->describe() + ": the gradient rule of '" + n->opType +
                         "' gave no gradient for input " + llvm::Twine(i));
      grads.accumulate(n->inputs[i], dx, *n);
    }
  }

  // A float initializer that reaches the loss only through ops that carry no
  // gradient (a causal-mask buffer compared with 0, as nanoGPT's is) gets
  // none: it is a constant of the model, as it is a buffer in PyTorch, and
  // no optimizer may touch it (weight decay would change it).
  llvm::erase_if(trainable, [&](const ir::Value *p) { return !grads.get(p); });
  if (trainable.empty())
    return makeError("nothing to train: no gradient from the loss '" +
                     (*loss)->name + "' reaches an unfrozen float initializer");

  // Updates in the order the gradients complete: backward ends at a
  // parameter's first forward use, so the latest-used come first. An update
  // moved to the host can then start while backward is still running.
  llvm::DenseMap<const ir::Value *, size_t> firstUse;
  for (size_t i = 0; i < forward.size(); ++i)
    for (const ir::Value *in : forward[i]->inputs)
      if (in)
        firstUse.try_emplace(in, i);
  std::stable_sort(trainable.begin(), trainable.end(),
                   [&](const ir::Value *a, const ir::Value *b) {
                     return firstUse.lookup(a) > firstUse.lookup(b);
                   });
  for (ir::Value *param : trainable)
    appendOptimizer(g, opts, param, grads.get(param));
  return true;
}

} // namespace

std::unique_ptr<Pass> createBuildTrainingPass() {
  return std::make_unique<BuildTraining>();
}

} // namespace zinc::passes
