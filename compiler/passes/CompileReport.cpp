//===- CompileReport.cpp - The --report JSON of INTERFACES.md -------------===//
#include "zinc/passes/CompileReport.h"
#include "zinc/passes/TierLayout.h"
#include "zinc/passes/OptimizerOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"

namespace zinc {

/// One key per initializer, or per tile of one (tiles share a name).
static std::string initializerShareKey(const ir::InitializerRef &init) {
  if (!init.isSlice())
    return init.name;
  return init.name + "@" + std::to_string(init.sliceAxis) + ":" +
         std::to_string(init.sliceBegin);
}

/// Bytes the plan moves per step over each link, from its copies: a
/// prediction read off the plan, not a measurement.
static llvm::json::Object transfersPerStep(const ir::Graph &g) {
  uint64_t h2d = 0, d2h = 0, nvmeRead = 0, nvmeWrite = 0, onTier = 0;
  for (const ir::Node *n : g.nodes()) {
    if (n->domain != "zinc" || (n->opType != "Copy" && n->opType != "CopyInto") ||
        n->inputs.empty() || !n->inputs[0])
      continue;
    const ir::Value *src = n->inputs[0];
    const ir::Value *dst = n->opType == "Copy" ? n->outputs[0]
                           : n->inputs.size() > 1 ? n->inputs[1] : nullptr;
    if (!dst)
      continue;
    uint64_t bytes = src->byteSize();
    if (src->tier == ir::Tier::Cpu && dst->tier == ir::Tier::Gpu)
      h2d += bytes;
    else if (src->tier == ir::Tier::Gpu && dst->tier == ir::Tier::Cpu)
      d2h += bytes;
    else if (src->tier == ir::Tier::Nvme)
      nvmeRead += bytes;
    else if (dst->tier == ir::Tier::Nvme)
      nvmeWrite += bytes;
    else
      onTier += bytes;
  }
  return llvm::json::Object{{"h2d", h2d},
                            {"d2h", d2h},
                            {"nvme_read", nvmeRead},
                            {"nvme_write", nvmeWrite},
                            {"within_tier", onTier}};
}

/// Bytes each rank's collectives carry per step, by kind: the whole
/// tensor each one gathers, reduces and scatters, or reduces. Read off the
/// plan: a prediction.
static llvm::json::Object collectivesPerStep(const ir::Graph &g) {
  uint64_t allgather = 0, reduceScatter = 0, allreduce = 0;
  for (const ir::Node *n : g.nodes()) {
    if (n->domain != kZincDomain)
      continue;
    // A bucket (BucketCollectives.h) carries all its tensors.
    auto sum = [](llvm::ArrayRef<ir::Value *> values) {
      uint64_t total = 0;
      for (const ir::Value *v : values)
        total += v ? v->byteSize() : 0;
      return total;
    };
    if (n->opType == "AllGather")
      allgather += sum(n->outputs);
    else if (n->opType == "ReduceScatter")
      reduceScatter += sum(n->inputs);
    else if (n->opType == "AllReduce")
      allreduce += sum(n->inputs);
  }
  return llvm::json::Object{{"allgather", allgather},
                            {"reduce_scatter", reduceScatter},
                            {"allreduce", allreduce}};
}

static llvm::json::Object checkpointingReport(const CompileConfig &config) {
  const CheckpointSummary &c = config.checkpointing;
  llvm::json::Array names;
  for (const std::string &name : c.checkpoints)
    names.push_back(name);
  return llvm::json::Object{{"mode", config.checkpointMode},
                            {"saved_bytes_before", c.savedBytesBefore},
                            {"saved_bytes_after", c.savedBytesAfter},
                            {"recomputed_segments", c.recomputedSegments},
                            {"checkpoints", std::move(names)},
                            {"checkpoint_bytes", c.checkpointBytes},
                            {"recomputed_nodes", c.recomputedNodes},
                            {"recompute_flops", c.recomputeFlops},
                            {"budget_bytes", c.budgetBytes},
                            {"reason", c.reason}};
}

static llvm::json::Array tilingList(llvm::ArrayRef<TiledNode> tiled) {
  llvm::json::Array list;
  for (const TiledNode &t : tiled)
    list.push_back(llvm::json::Object{{"node", t.node},
                                      {"op", t.op},
                                      {"tiles", t.tiles},
                                      {"working_set_bytes", t.wholeWorkingSet},
                                      {"tile_working_set_bytes", t.tileWorkingSet},
                                      {"budget_bytes", t.budget},
                                      {"reason", t.reason}});
  return list;
}

/// The gradient one rank holds for an update reading `grad`: past the
/// copies that move it between tiers, the whole all-reduced gradient when
/// the update reads this rank's shard of it (ZeRO stage 1).
static const ir::Value *heldGradient(const ir::Value *grad) {
  while (grad->def && grad->def->domain == kZincDomain && !grad->def->inputs.empty() &&
         (grad->def->opType == "Copy" || grad->def->opType == "ShardOf"))
    grad = grad->def->inputs[0];
  return grad;
}

llvm::json::Value buildCompileReport(const ir::Graph &g, const plan::Plan &p,
                                     const CompileConfig &config,
                                     const Hardware &hw) {
  bool mixed = config.precision == "bf16" || config.precision == "fp16";
  uint64_t computeBytes = mixed ? 2 : 4;
  // The optimizer updates' masters: a weight's compute copy is another
  // value with its initializer (mixed precision, or ZeRO's whole fp32
  // weight beside a sharded master).
  llvm::DenseSet<const ir::Value *> masters;
  for (const auto &n : g.nodes())
    if (isOptimizerNode(*n) && !n->inputs.empty() && n->inputs[0])
      masters.insert(n->inputs[0]);
  // Per initializer (or tile of one): its elements in the whole model, and
  // what one rank holds of its compute-precision copy: the copy's elements
  // (a shard's under ZeRO stage 3), or the master's when the master is
  // what compute reads.
  struct Share {
    int64_t whole = 0;
    int64_t held = -1;
    int64_t masterHeld = 0;
    bool modelState = false;
    bool separateMaster = false;
  };
  llvm::StringMap<Share> shares;
  std::vector<std::string> order;
  for (const auto &v : g.values()) {
    if (!v->init || !isFloatDType(v->dtype) ||
        (v->role != ir::ValueRole::Parameter && v->role != ir::ValueRole::State &&
         v->role != ir::ValueRole::ModelState))
      continue;
    auto [it, added] = shares.try_emplace(initializerShareKey(*v->init));
    if (added)
      order.push_back(it->first().str());
    Share &s = it->second;
    s.whole = v->wholeElements();
    s.modelState |= v->role == ir::ValueRole::ModelState;
    if (masters.count(v.get()))
      s.masterHeld = v->numElements();
    else if (s.held < 0 || v->numElements() < s.held)
      s.held = v->numElements();
  }
  int64_t params = 0;
  uint64_t paramBytes = 0;
  // Model state (BatchNorm running statistics) is a float initializer too,
  // so it counts in "params" as INTERFACES.md defines it; "model_state"
  // says how much of that is state the step updates rather than trains.
  int64_t modelState = 0;
  uint64_t modelStateBytes = 0;
  for (const std::string &key : order) {
    Share &s = shares[key];
    s.separateMaster = s.held >= 0 && s.masterHeld > 0;
    int64_t held = s.held >= 0 ? s.held : s.masterHeld;
    params += s.whole;
    paramBytes += held * computeBytes;
    if (s.modelState) {
      modelState += s.whole;
      modelStateBytes += held * 4;
    }
  }
  // What one optimizer update holds per trained element: the fp32 master
  // (in mixed precision, or whenever it is a sharded value of its own) and
  // its states (Adam: m and v; SGD: the momentum buffer when there is
  // momentum); and the gradient it reads, whole or this rank's shard.
  // Inference has none of these.
  int64_t trainable = 0;
  uint64_t optimizerBytes = 0;
  uint64_t gradBytes = 0;
  for (const auto &n : g.nodes()) {
    if (!isOptimizerNode(*n) || n->inputs.size() < 2 || !n->inputs[0])
      continue;
    bool adam = n->opType != "SGD";
    const ir::Value *param = n->inputs[0];
    trainable += param->wholeElements();
    bool separate = param->init && shares.lookup(initializerShareKey(*param->init)).separateMaster;
    if (mixed || (separate && param->isShard()))
      optimizerBytes += param->numElements() * 4;
    for (unsigned i = 2; i < (adam ? 4u : 3u) && i < n->inputs.size(); ++i)
      if (n->inputs[i])
        optimizerBytes += n->inputs[i]->byteSize();
    if (n->inputs[1])
      gradBytes += heldGradient(n->inputs[1])->numElements() * computeBytes;
  }
  // --optimizer=none: the gradients are outputs "<initializer>.grad".
  for (const ir::Value *out : g.outputs()) {
    llvm::StringRef name(out->name);
    if (name.consume_back(".grad") && shares.count(name)) {
      trainable += out->numElements();
      gradBytes += out->numElements() * computeBytes;
    }
  }

  uint64_t peaks[3] = {0, 0, 0};
  for (const plan::TierInfo &t : p.tiers())
    if (t.tier() >= 0 && t.tier() < 3)
      peaks[t.tier()] = t.peak();
  // What no packing could beat: the most bytes live at once. The rest of
  // the peak is fragmentation of the static layout.
  TierLayout layout = computeTierLayout(g);
  // The plan numbers its tiers as the IR does (plan/PlanNames.cpp).
  auto tier = [&](ir::Tier t, uint64_t capacity) -> llvm::json::Object::KV {
    uint64_t peak = peaks[static_cast<unsigned>(t)];
    uint64_t live = layout.liveBound[static_cast<unsigned>(t)];
    return {ir::tierName(t),
            llvm::json::Object{
                {"capacity", capacity},
                {"peak", peak},
                {"live_bytes", live},
                {"fragmentation_bytes", peak > live ? peak - live : 0}}};
  };
  return llvm::json::Object{
      {"model", llvm::json::Object{{"params", params},
                                   {"trainable_params", trainable},
                                   {"model_state", modelState}}},
      {"config", llvm::json::Object{{"mode", config.mode},
                                    {"ranks", config.ranks},
                                    {"zero_stage", config.zeroStage},
                                    {"precision", config.precision},
                                    {"optimizer", config.optimizer},
                                    {"hw", hw.name}}},
      {"per_rank",
       llvm::json::Object{
           {"model_states_bytes",
            llvm::json::Object{{"params", paramBytes},
                               {"grads", gradBytes},
                               {"optimizer", optimizerBytes},
                               {"total", paramBytes + gradBytes + optimizerBytes},
                               {"model_state", modelStateBytes}}},
           {"tiers", llvm::json::Object{tier(ir::Tier::Gpu, hw.gpuMem),
                                        tier(ir::Tier::Cpu, hw.cpuMem),
                                        tier(ir::Tier::Nvme, hw.nvmeMem)}}}},
      {"placement", llvm::json::Object{{"optimizer_states", ir::tierName(config.optimizerTier)},
                                       {"parameters", ir::tierName(config.paramsTier)}}},
      {"tiling", tilingList(config.tiling)},
      {"activation_checkpointing", checkpointingReport(config)},
      {"predicted_transfer_bytes_per_step", transfersPerStep(g)},
      {"predicted_collective_bytes_per_step", collectivesPerStep(g)}};
}

} // namespace zinc
