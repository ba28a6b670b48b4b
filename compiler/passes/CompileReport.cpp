//===- CompileReport.cpp - The --report JSON of INTERFACES.md -------------===//
#include "zinc/passes/CompileReport.h"
#include "zinc/passes/TierLayout.h"
#include "llvm/ADT/StringSet.h"

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

llvm::json::Value buildCompileReport(const ir::Graph &g, const plan::Plan &p,
                                     const CompileConfig &config,
                                     const Hardware &hw) {
  // Every float initializer once: a parameter's fp32 master and its
  // compute-precision copy (a State with the same initializer) are one.
  bool mixed = config.precision == "bf16" || config.precision == "fp16";
  uint64_t computeBytes = mixed ? 2 : 4;
  int64_t params = 0;
  uint64_t paramBytes = 0;
  // Model state (BatchNorm running statistics) is a float initializer too,
  // so it counts in "params" as INTERFACES.md defines it; "model_state"
  // says how much of that is state the step updates rather than trains.
  int64_t modelState = 0;
  uint64_t modelStateBytes = 0;
  llvm::StringSet<> seen;
  for (const auto &v : g.values())
    if (v->init && isFloatDType(v->dtype) &&
        (v->role == ir::ValueRole::Parameter || v->role == ir::ValueRole::State ||
         v->role == ir::ValueRole::ModelState) &&
        seen.insert(initializerShareKey(*v->init)).second) {
      params += v->numElements();
      paramBytes += mixed ? v->numElements() * computeBytes : v->byteSize();
      if (v->role == ir::ValueRole::ModelState) {
        modelState += v->numElements();
        modelStateBytes += v->byteSize();
      }
    }
  // What one optimizer update holds per trained element: the fp32 master
  // (mixed precision only) and its states (Adam: m and v; SGD: the momentum
  // buffer when there is momentum). Inference has none of these.
  int64_t trainable = 0;
  uint64_t optimizerBytes = 0;
  for (const auto &n : g.nodes()) {
    bool adam = n->opType == "AdamW" || n->opType == "Adam";
    if (n->domain != "zinc" || (!adam && n->opType != "SGD") || n->inputs.empty())
      continue;
    const ir::Value *param = n->inputs[0];
    trainable += param->numElements();
    if (mixed)
      optimizerBytes += param->numElements() * 4;
    for (unsigned i = 2; i < (adam ? 4u : 3u) && i < n->inputs.size(); ++i)
      if (n->inputs[i])
        optimizerBytes += n->inputs[i]->byteSize();
  }
  // --optimizer=none: the gradients are outputs "<initializer>.grad".
  for (const ir::Value *out : g.outputs()) {
    llvm::StringRef name(out->name);
    if (name.consume_back(".grad") && seen.count(name))
      trainable += out->numElements();
  }
  uint64_t gradBytes = trainable * computeBytes;

  uint64_t peaks[3] = {0, 0, 0};
  for (const plan::TierInfo &t : p.tiers())
    if (t.tier() >= 0 && t.tier() < 3)
      peaks[t.tier()] = t.peak();
  // What no packing could beat: the most bytes live at once. The rest of
  // the peak is fragmentation of the static layout.
  TierLayout layout = computeTierLayout(g);
  auto tier = [&](uint64_t capacity, uint64_t peak, ir::Tier t) {
    uint64_t live = layout.liveBound[static_cast<unsigned>(t)];
    return llvm::json::Object{{"capacity", capacity},
                              {"peak", peak},
                              {"live_bytes", live},
                              {"fragmentation_bytes", peak > live ? peak - live : 0}};
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
           {"tiers", llvm::json::Object{{"gpu", tier(hw.gpuMem, peaks[plan::TIER_GPU], ir::Tier::Gpu)},
                                        {"cpu", tier(hw.cpuMem, peaks[plan::TIER_CPU], ir::Tier::Cpu)},
                                        {"nvme", tier(hw.nvmeMem, peaks[plan::TIER_NVME], ir::Tier::Nvme)}}}}},
      {"placement", llvm::json::Object{{"optimizer_states", ir::tierName(config.optimizerTier)},
                                       {"parameters", ir::tierName(config.paramsTier)}}},
      {"tiling", tilingList(config.tiling)},
      {"activation_checkpointing", checkpointingReport(config)},
      {"predicted_transfer_bytes_per_step", transfersPerStep(g)}};
}

} // namespace zinc
