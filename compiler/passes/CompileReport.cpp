//===- CompileReport.cpp - The --report JSON of INTERFACES.md -------------===//
#include "zinc/passes/CompileReport.h"

namespace zinc {

llvm::json::Value buildCompileReport(const ir::Graph &g, const plan::Plan &p,
                                     const CompileConfig &config,
                                     const Hardware &hw) {
  int64_t params = 0;
  uint64_t paramBytes = 0;
  for (const ir::Value *v : g.initializers())
    if (isFloatDType(v->dtype)) {
      params += v->numElements();
      paramBytes += v->byteSize();
    }
  // Inference keeps no gradients or optimizer states: those classes are
  // truly zero, and nothing is trainable.
  int64_t trainable = config.mode == "train" ? params : 0;
  uint64_t gradBytes = 0, optimizerBytes = 0;

  uint64_t peaks[3] = {0, 0, 0};
  for (const plan::TierInfo &t : p.tiers())
    if (t.tier() >= 0 && t.tier() < 3)
      peaks[t.tier()] = t.peak();
  auto tier = [&](uint64_t capacity, uint64_t peak) {
    return llvm::json::Object{{"capacity", capacity}, {"peak", peak}};
  };
  return llvm::json::Object{
      {"model", llvm::json::Object{{"params", params}, {"trainable_params", trainable}}},
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
                               {"total", paramBytes + gradBytes + optimizerBytes}}},
           {"tiers", llvm::json::Object{{"gpu", tier(hw.gpuMem, peaks[plan::TIER_GPU])},
                                        {"cpu", tier(hw.cpuMem, peaks[plan::TIER_CPU])},
                                        {"nvme", tier(hw.nvmeMem, peaks[plan::TIER_NVME])}}}}},
      {"tiling", llvm::json::Array{}}};
}

} // namespace zinc
