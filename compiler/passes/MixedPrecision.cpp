//===- MixedPrecision.cpp - mixed-precision: bf16/fp16 compute, fp32 master -===//
//
// Runs after build-training (and on inference graphs) when --precision is
// bf16 or fp16. Afterwards:
//  - every fp32 activation and float Constant is in the compute dtype C,
//    except the loss head (below); float graph inputs are cast at entry;
//  - each float parameter keeps its fp32 value as the master weight (role
//    param, loaded from its initializer) and gets a C copy, a State
//    initialised from the same initializer, which every C node (forward and
//    backward) reads. The optimizer node of a trained parameter reads its C
//    gradient in fp32, updates the fp32 master and states, and writes the C
//    copy in the same pass over memory;
//  - fp16 loss scaling (GradScaler's semantics): the loss gradient is seeded
//    with the scale, one node checks every gradient for inf/NaN before the
//    updates, the optimizer nodes unscale in fp32 as they read the gradient
//    and skip the whole update when one is not finite, and a last node
//    updates the scale.
//
// The copy is a State rather than a Cast at the start of every step because
// it is the persistent tensor ZeRO moves: the memory planner can keep the fp32
// master and optimizer states on the host or NVMe next to the update while
// only the 2-byte copy travels to the GPU.
//
// Attention's log-sum-exp stays fp32 beside its C output. BatchNorm's
// running statistics (model state) stay fp32, as PyTorch keeps
// them under autocast: so do the statistics a training-mode BatchNorm
// outputs (its updated running statistics, stored into the state, and the
// batch mean and inverse std its gradient reads); the kernels take fp32
// statistics beside C activations.
//
// The loss head stays fp32, as autocast keeps losses and reductions to a
// scalar in fp32: the node defining the loss and the scalar nodes feeding
// it, and in the backward the nodes that read only the loss gradient, head
// values and constants. Without that the seed itself (GradScaler's 65536)
// would overflow fp16 (max 65504); with it, gradients meet fp16 where they
// enter the rest of the backward, already divided by the reduction's count.
//
//===----------------------------------------------------------------------===//
#include "zinc/passes/LossOutput.h"
#include "zinc/passes/OptimizerOps.h"
#include "zinc/passes/Pass.h"
#include "zinc/support/Error.h"
#include "zinc/support/Float16.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include <cstring>

namespace zinc::passes {
namespace {

class MixedPrecision : public Pass {
public:
  llvm::StringRef getName() const override { return "Mixed Precision"; }
  llvm::StringRef getArgument() const override { return "mixed-precision"; }
  bool isEnabled(const PassContext &ctx) const override {
    return ctx.training.precision != PrecisionKind::FP32;
  }
  llvm::Expected<bool> run(ir::Graph &g, PassContext &ctx) override;
};

/// ONNX TensorProto.DataType codes (Cast's `to`).
constexpr int64_t kOnnxFloat = 1;

/// An f32 tensor attribute's values rounded to `to`.
void convertTensor(TensorData &t, DType to) {
  size_t n = t.bytes.size() / 4;
  std::vector<uint8_t> out(n * 2);
  for (size_t i = 0; i < n; ++i) {
    float f;
    std::memcpy(&f, t.bytes.data() + 4 * i, 4);
    uint16_t h = to == DType::F16 ? floatToHalf(f) : floatToBf16(f);
    std::memcpy(out.data() + 2 * i, &h, 2);
  }
  t.dtype = to;
  t.bytes = std::move(out);
}

/// The nodes that stay fp32: the loss head, forward and backward.
llvm::DenseSet<const ir::Node *> lossHead(const ir::Graph &g, const ir::Value *loss,
                                          const ir::Value *seed) {
  llvm::DenseSet<const ir::Node *> head;
  llvm::DenseSet<const ir::Value *> headValues;
  // Forward: the loss's definition and the scalars it is made of.
  llvm::SmallVector<const ir::Value *, 8> work{loss};
  while (!work.empty()) {
    const ir::Value *v = work.pop_back_val();
    const ir::Node *n = v->def;
    if (!n || !head.insert(n).second)
      continue;
    for (const ir::Value *in : n->inputs)
      if (in && in->dtype == DType::F32 && in->numElements() == 1)
        work.push_back(in);
  }
  for (const ir::Node *n : head) {
    headValues.insert(n->inputs.begin(), n->inputs.end());
    headValues.insert(n->outputs.begin(), n->outputs.end());
  }
  if (!seed || !seed->def)
    return head;
  // Backward: what the seed flows through before it meets anything else.
  llvm::DenseSet<const ir::Value *> grads{seed};
  head.insert(seed->def);
  bool afterSeed = false;
  for (const auto &n : g.nodes()) {
    afterSeed |= n == seed->def;
    if (!afterSeed || n == seed->def || isOptimizerNode(*n))
      continue;
    bool readsGrad = false, onlyHead = true;
    for (const ir::Value *in : n->inputs) {
      if (!in || in->dtype != DType::F32)
        continue;
      bool isGrad = grads.count(in);
      readsGrad |= isGrad;
      bool constant = in->def && in->def->opType == "Constant";
      onlyHead &= isGrad || headValues.count(in) || constant || in->numElements() == 1;
    }
    if (!readsGrad || !onlyHead)
      continue;
    head.insert(n);
    grads.insert(n->outputs.begin(), n->outputs.end());
  }
  return head;
}

class Rewriter {
public:
  Rewriter(ir::Graph &g, DType compute) : g(g), compute(compute) {}

  llvm::Error run(const ir::Value *loss, ir::Value *seed, const TrainingOptions &opts);

private:
  /// The region a node computes in: F32 (loss head) or the compute dtype.
  DType regionOf(const ir::Node &n) const {
    return head.count(&n) ? DType::F32 : compute;
  }
  ir::Value *copyOf(ir::Value *param);
  ir::Value *castOf(ir::Value *v, DType to, ir::Node *before);
  ir::Value *state(llvm::StringRef name, DType dtype);

  ir::Graph &g;
  DType compute;
  llvm::DenseSet<const ir::Node *> head;
  /// Values whose dtype this pass changed from f32 to the compute dtype.
  llvm::DenseSet<const ir::Value *> lowered;
  llvm::MapVector<ir::Value *, ir::Value *> copies;
  llvm::DenseMap<std::pair<ir::Value *, unsigned>, ir::Value *> casts;
  /// Model state and the statistics training-mode BatchNorms output.
  llvm::DenseSet<const ir::Value *> keptF32;
};

ir::Value *Rewriter::state(llvm::StringRef name, DType dtype) {
  return g.addValue(g.uniqueValueName(name), dtype, {}, ir::ValueRole::State);
}

ir::Value *Rewriter::copyOf(ir::Value *param) {
  ir::Value *&copy = copies[param];
  if (!copy) {
    llvm::StringRef suffix = compute == DType::F16 ? ".fp16" : ".bf16";
    copy = g.addValue(g.uniqueValueName(param->name + suffix.str()), compute,
                      param->shape, ir::ValueRole::State);
    copy->init = param->init;
  }
  return copy;
}

ir::Value *Rewriter::castOf(ir::Value *v, DType to, ir::Node *before) {
  ir::Value *&cast = casts[{v, static_cast<unsigned>(to)}];
  if (!cast) {
    std::string name = g.uniqueValueName(v->name + (to == DType::F32 ? ".f32" : ".lp"));
    cast = g.addValue(name, to, v->shape, ir::ValueRole::Activation);
    AttributeList attrs;
    attrs.set(makeIntAttr("to", static_cast<int64_t>(to)));
    // Graph inputs are cast once, at the start of the step.
    if (v->role == ir::ValueRole::Input)
      before = g.firstNode();
    g.insertNode(before, "Cast", g.uniqueNodeName(name), {v}, {cast}, std::move(attrs));
  }
  return cast;
}

llvm::Error Rewriter::run(const ir::Value *loss, ir::Value *seed,
                          const TrainingOptions &opts) {
  if (loss)
    head = lossHead(g, loss, seed);
  std::vector<ir::Node *> nodes;
  for (const auto &n : g.nodes())
    nodes.push_back(n);
  std::vector<ir::Node *> optimizers;
  for (ir::Node *n : nodes)
    if (isOptimizerNode(*n))
      optimizers.push_back(n);

  // Readers decide a Constant's region: fp32 when the head alone reads it.
  llvm::DenseSet<const ir::Value *> readByCompute, readByHead;
  for (ir::Node *n : nodes)
    if (!isOptimizerNode(*n))
      for (const ir::Value *in : n->inputs)
        (head.count(n) ? readByHead : readByCompute).insert(in);
  for (ir::Node *n : nodes) {
    const ir::Value *out = n->outputs.empty() ? nullptr : n->outputs[0];
    if (n->opType != "Constant" || !n->domain.empty() || !out || out == seed)
      continue;
    if (readByHead.count(out) && !readByCompute.count(out))
      head.insert(n);
    else
      head.erase(n);
  }

  for (const auto &v : g.values())
    if (v->role == ir::ValueRole::ModelState)
      keptF32.insert(v.get());
  for (ir::Node *n : nodes)
    if (n->domain.empty() && n->opType == "BatchNormalization" &&
        n->attrs.getInt("training_mode", 0) != 0)
      for (const ir::Value *out : llvm::drop_begin(n->outputs))
        keptF32.insert(out);
  // Attention's per-row log-sum-exp stays fp32, as the kernels keep it.
  for (ir::Node *n : nodes)
    if (n->domain == "zinc" && n->opType == "Attention" && n->outputs.size() > 1 &&
        n->outputs[1])
      keptF32.insert(n->outputs[1]);

  // Outputs first: every f32 value a compute-region node defines.
  for (ir::Node *n : nodes) {
    if (isOptimizerNode(*n) || regionOf(*n) != compute)
      continue;
    for (ir::Value *out : n->outputs)
      if (out && out->dtype == DType::F32 && !keptF32.count(out)) {
        out->dtype = compute;
        lowered.insert(out);
      }
    if (!n->domain.empty())
      continue;
    if (n->opType == "Constant" || n->opType == "ConstantOfShape") {
      const TensorData *t = n->attrs.getTensor("value");
      if (t && t->dtype == DType::F32) {
        Attribute a = *n->attrs.find("value");
        convertTensor(a.tensor, compute);
        n->attrs.set(std::move(a));
      } else if (!t && n->opType == "ConstantOfShape" && lowered.count(n->outputs[0])) {
        // ConstantOfShape's default is an f32 zero.
        Attribute a;
        a.name = "value";
        a.kind = AttrKind::Tensor;
        a.tensor.dtype = compute;
        a.tensor.shape = {1};
        a.tensor.bytes.assign(2, 0);
        n->attrs.set(std::move(a));
      }
    } else if (n->opType == "Cast" && n->attrs.getInt("to", 0) == kOnnxFloat &&
               n->outputs[0] && lowered.count(n->outputs[0])) {
      n->attrs.set(makeIntAttr("to", static_cast<int64_t>(compute)));
    }
  }

  // Then operands: the C copy of a parameter, or a Cast where a value's
  // dtype is not its reader's.
  for (ir::Node *n : nodes) {
    if (isOptimizerNode(*n))
      continue;
    DType want = regionOf(*n);
    for (unsigned i = 0; i < n->inputs.size(); ++i) {
      ir::Value *in = n->inputs[i];
      if (!in || keptF32.count(in))
        continue;
      if (want == compute && in->dtype == DType::F32) {
        if (in->role == ir::ValueRole::Parameter)
          n->setInput(i, copyOf(in));
        else
          n->setInput(i, castOf(in, compute, n));
      } else if (want == DType::F32 && in->dtype == compute && lowered.count(in)) {
        n->setInput(i, castOf(in, DType::F32, n));
      }
    }
  }

  // The optimizer reads its gradient in whatever dtype it comes (the kernel
  // converts to fp32) and writes the copy the compute region reads.
  ir::Value *foundInf = nullptr, *scale = nullptr, *tracker = nullptr, *step = nullptr;
  bool scaling = opts.lossScale != LossScaleKind::None && seed && !optimizers.empty();
  if (scaling) {
    scale = state("loss_scale", DType::F32);
    tracker = state("loss_scale.growth_tracker", DType::I64);
    foundInf = state("loss_scale.found_inf", DType::F32);
    step = state("optimizer.step", DType::I64);
    // The seed becomes the scale (the first step's from init_scale).
    ir::Node *seedDef = seed->def;
    AttributeList attrs;
    attrs.set(makeFloatAttr("init_scale", opts.initialLossScale));
    // scaler.scale(loss / N).backward() seeds with scale / N.
    if (opts.gradAccum > 1)
      attrs.set(makeFloatAttr("divisor", static_cast<double>(opts.gradAccum)));
    g.insertNode(seedDef, "LossScale", g.uniqueNodeName(seedDef->name + "/loss_scale"),
                 {scale}, {seed}, std::move(attrs), "zinc");
    g.eraseNode(seedDef);
    // One check per gradient, right where the gradient is complete, each
    // ORing into found_inf after the first (which sets it): a gradient is
    // read once on the GPU while it is there, and may leave at once. One
    // check of every gradient at the end of backward would hold (or bring
    // back) all the model's gradients on the GPU together.
    llvm::DenseMap<const ir::Node *, size_t> position;
    for (ir::Node *n : g.nodes())
      position[n] = position.size();
    std::vector<std::pair<size_t, ir::Value *>> grads;
    for (ir::Node *n : optimizers) {
      ir::Value *grad = n->inputs[1];
      grads.push_back({grad->def ? position.lookup(grad->def) : 0, grad});
    }
    llvm::stable_sort(grads, [](const auto &a, const auto &b) { return a.first < b.first; });
    // Checks of gradients one node makes follow each other in the order
    // sorted above (the first one, which sets the flag, first).
    llvm::DenseMap<const ir::Node *, ir::Node *> lastCheckAfter;
    for (size_t i = 0; i < grads.size(); ++i) {
      ir::Value *grad = grads[i].second;
      ir::Node *after = grad->def ? lastCheckAfter.lookup(grad->def) : nullptr;
      if (!after)
        after = grad->def;
      ir::Node *at = after ? g.nextNode(after) : optimizers.front();
      AttributeList attrs;
      if (i > 0)
        attrs.set(makeIntAttr("accumulate", 1));
      ir::Node *check = g.insertNode(at, "CheckFiniteGrads",
                                     g.uniqueNodeName("loss_scale/check_finite/" + grad->name),
                                     {foundInf, scale, grad}, {}, std::move(attrs), "zinc");
      if (grad->def)
        lastCheckAfter[grad->def] = check;
    }
  }
  for (ir::Node *n : optimizers) {
    llvm::SmallVector<ir::Value *, 4> extra;
    auto it = copies.find(n->inputs[0]);
    extra.push_back(it == copies.end() ? nullptr : it->second);
    if (scaling)
      extra.append({foundInf, scale, step});
    while (!extra.empty() && !extra.back())
      extra.pop_back();
    if (extra.empty())
      continue;
    llvm::SmallVector<ir::Value *, 8> operands(n->inputs.begin(), n->inputs.end());
    operands.resize(optimizerExtraOperand(*n, OptimizerExtra::ComputeCopy), nullptr);
    operands.append(extra.begin(), extra.end());
    n->setInputs(operands);
  }
  if (scaling) {
    bool dynamic = opts.lossScale == LossScaleKind::Dynamic;
    AttributeList attrs;
    attrs.set(makeFloatAttr("growth_factor", dynamic ? opts.lossScaleGrowthFactor : 1.0));
    attrs.set(makeFloatAttr("backoff_factor", dynamic ? opts.lossScaleBackoffFactor : 1.0));
    attrs.set(makeIntAttr("growth_interval", opts.lossScaleGrowthInterval));
    g.addNode("UpdateLossScale", g.uniqueNodeName("loss_scale/update"),
              {scale, tracker, foundInf, step}, {}, std::move(attrs), "zinc");
  }
  return llvm::Error::success();
}

llvm::Expected<bool> MixedPrecision::run(ir::Graph &g, PassContext &ctx) {
  const TrainingOptions &opts = ctx.training;
  if (opts.precision == PrecisionKind::FP32)
    return false;
  DType compute = opts.precision == PrecisionKind::FP16 ? DType::F16 : DType::BF16;
  for (const auto &v : g.values())
    if (v->role == ir::ValueRole::Parameter && isFloatDType(v->dtype) &&
        v->dtype != DType::F32)
      return makeError("initializer '" + (v->init ? v->init->name : v->name) + "' is " +
                       dtypeName(v->dtype) +
                       "; mixed precision keeps fp32 master weights and needs "
                       "fp32 initializers");

  // An inference graph may have no loss: then there is no fp32 head.
  const ir::Value *loss = nullptr;
  auto found = findLossOutput(g, opts.loss);
  if (found)
    loss = *found;
  else
    llvm::consumeError(found.takeError());
  ir::Value *seed = nullptr;
  if (loss)
    if (ir::Value *v = g.lookupValue(loss->name + ".grad"))
      if (v->def && v->def->opType == "Constant" && v->def->domain.empty())
        seed = v;
  if (!seed && opts.lossScale != LossScaleKind::None &&
      llvm::any_of(g.nodes(), [](const auto &n) { return isOptimizerNode(*n); }))
    return makeError("loss scaling: no loss gradient '" +
                     (loss ? loss->name : std::string("<loss>")) +
                     ".grad' to seed (run build-training before mixed-precision)");

  Rewriter rewriter(g, compute);
  if (auto err = rewriter.run(loss, seed, opts))
    return err;
  return true;
}

} // namespace

std::unique_ptr<Pass> createMixedPrecisionPass() {
  return std::make_unique<MixedPrecision>();
}

} // namespace zinc::passes
