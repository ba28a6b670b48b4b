//===- CompileReport.h - The --report JSON of INTERFACES.md ---------------===//
#ifndef ZINC_PASSES_COMPILEREPORT_H
#define ZINC_PASSES_COMPILEREPORT_H

#include "zinc/ir/Graph.h"
#include "zinc/passes/MemoryOptions.h"
#include "zinc/plan/PlanFile.h"
#include "zinc/support/Hardware.h"
#include "llvm/Support/JSON.h"

namespace zinc {

struct CompileConfig {
  std::string mode = "infer";
  unsigned ranks = 1;
  unsigned zeroStage = 0;
  std::string precision = "fp32";
  std::string optimizer = "adamw";
  /// The operators the tile pass split.
  std::vector<TiledNode> tiling;
  /// --activation-checkpointing and what the checkpoint pass chose.
  std::string checkpointMode = "auto";
  CheckpointSummary checkpointing;
  /// Homes the memory planner chose.
  ir::Tier optimizerTier = ir::Tier::Gpu;
  ir::Tier paramsTier = ir::Tier::Gpu;
};

/// Model size, configuration, per-rank model-state bytes and each tier's
/// capacity and proven peak, from the compiled graph and its plan.
llvm::json::Value buildCompileReport(const ir::Graph &g, const plan::Plan &p,
                                     const CompileConfig &config,
                                     const Hardware &hw);

} // namespace zinc

#endif
