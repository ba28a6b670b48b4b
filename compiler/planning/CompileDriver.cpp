//===- CompileDriver.cpp - The compiles around the memory planner's search
//-===//
//
// What a compilation plans besides one pass of the pipeline: the budget
// retry (tiling and checkpointing aim lower when the GPU does not fit), the
// evaluation program (a second, inference compile that takes the training
// plan's decisions) and --grad-reduce=auto's choice (two compiles of the
// step, the cost model's faster kept).
//
//===----------------------------------------------------------------------===//
#include "zinc/planning/CompileDriver.h"
#include "zinc/passes/DoesNotFit.h"
#include "zinc/passes/EmitPlan.h"
#include "zinc/passes/LossOutput.h"
#include "zinc/plan/PlanSimulator.h"
#include "zinc/plan/PlanVerifier.h"
#include "llvm/Support/BuryPointer.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

namespace zinc::planning {

llvm::Error
runWithBudgetRetry(passes::PassManager &pm, passes::PassContext &ctx,
                   std::unique_ptr<ir::Graph> &graph, const ir::Graph *imported,
                   const MemoryOptions &asGiven,
                   llvm::function_ref<void(unsigned divisor)> retrying) {
  while (true) {
    llvm::Error err = pm.run(*graph);
    if (!err)
      return llvm::Error::success();
    unsigned divisor = ctx.memory.budgetDivisor;
    if (!imported || !passes::lessGpuMayFit(err) ||
        divisor * 2 > MemoryOptions::kMaxBudgetDivisor)
      return err;
    llvm::consumeError(std::move(err));
    retrying(divisor * 2);
    ctx.memory = asGiven;
    ctx.memory.budgetDivisor = divisor * 2;
    ctx.layout.reset();
    graph = imported->clone();
  }
}

llvm::Expected<plan::Plan>
planWithDefaultPipeline(std::unique_ptr<ir::Graph> graph,
                        passes::PassContext ctx, const Hardware &hw,
                        llvm::StringRef emitMode, bool verifyEach) {
  MemoryOptions asGiven = ctx.memory;
  ctx.layout.reset();
  ctx.hardware = &hw;
  ctx.note = [](const llvm::Twine &) {};
  passes::PassManager pm(ctx);
  pm.setVerifyEach(verifyEach);
  pm.addDefaultPipeline();
  bool adaptive = ctx.memory.tileMode == TileMode::Auto ||
                  ctx.memory.checkpointMode == CheckpointMode::Auto;
  std::unique_ptr<ir::Graph> imported = adaptive ? graph->clone() : nullptr;
  if (llvm::Error err = runWithBudgetRetry(pm, ctx, graph, imported.get(),
                                           asGiven, [](unsigned) {}))
    return std::move(err);
  auto loss = findLossOutput(*graph, ctx.training.loss);
  if (!loss)
    return loss.takeError();
  EmitOptions emitOpts;
  emitOpts.mode = emitMode.str();
  emitOpts.hw = hw.name;
  emitOpts.hardwareJson = hardwareToJson(hw);
  emitOpts.gpuCapacity = hw.gpuMem;
  emitOpts.cpuCapacity = hw.cpuMem;
  emitOpts.nvmeCapacity = hw.nvmeMem;
  emitOpts.loss = *loss;
  emitOpts.layout = ctx.layout.get();
  emitOpts.zeroStage = ctx.zero.stage;
  emitOpts.gradAccum = static_cast<unsigned>(ctx.training.gradAccum);
  auto plan = emitPlan(*graph, emitOpts);
  llvm::BuryPointer(std::move(graph));
  return plan;
}

llvm::Expected<plan::Plan> buildEvalPlan(std::unique_ptr<ir::Graph> graph,
                                         const passes::PassContext &trained,
                                         const MemoryOptions &asGiven,
                                         const Hardware &hw, bool verifyEach) {
  passes::PassContext ctx;
  ctx.training = trained.training;
  ctx.training.mode = CompileMode::Infer;
  ctx.training.gradAccum = 1;
  ctx.training.clipGradNorm = 0;
  ctx.training.lossScale = LossScaleKind::None;
  ctx.memory = asGiven;
  ctx.memory.delayUpdates = false;
  // The evaluation's forward is the training step's: its weights stay where
  // the training plan keeps them and, when the training plan times its
  // prefetches, are prefetched as it times them, not searched again.
  const MemoryOptions &decided = trained.memory;
  ctx.memory.paramsOffload =
      decided.paramsTier == ir::Tier::Gpu   ? OffloadPolicy::None
      : decided.paramsTier == ir::Tier::Cpu ? OffloadPolicy::Cpu
                                            : OffloadPolicy::Nvme;
  if (decided.prefetchLead > 0) {
    ctx.memory.prefetchLead = decided.prefetchLead;
    ctx.memory.prefetchCountsQueue = decided.prefetchCountsQueue;
    ctx.memory.nvmeFetchesFirst = decided.nvmeFetchesFirst;
    ctx.memory.prefetchTimingGiven = true;
  }
  auto plan =
      planWithDefaultPipeline(std::move(graph), ctx, hw, "infer", verifyEach);
  if (!plan)
    return plan.takeError();
  if (llvm::Error err = plan::verifyPlan(*plan))
    return std::move(err);
  return plan;
}

/// The cost model's step seconds for the training plan of `imported` under
/// `given`'s options, as compile() plans it (without its notes).
static llvm::Expected<double> predictedStepSeconds(const ir::Graph &imported,
                                                   passes::PassContext given,
                                                   const MemoryOptions &asGiven,
                                                   const Hardware &hw,
                                                   bool verifyEach) {
  given.memory = asGiven;
  auto plan =
      planWithDefaultPipeline(imported.clone(), given, hw, "train", verifyEach);
  if (!plan)
    return plan.takeError();
  auto prediction = plan::simulatePlan(*plan, hw);
  if (!prediction)
    return prediction.takeError();
  llvm::BuryPointer(std::make_unique<plan::Plan>(std::move(*plan)));
  return prediction->stepSeconds;
}

TrainingOptions::GradReduce chooseGradReduce(const ir::Graph &imported,
                                             passes::PassContext ctx,
                                             const MemoryOptions &asGiven,
                                             const Hardware &hw,
                                             bool verifyEach) {
  using GradReduce = TrainingOptions::GradReduce;
  uint64_t wholeSums = 0;
  for (const auto &v : imported.values())
    if (v->role == ir::ValueRole::Parameter)
      wholeSums += uint64_t(v->numElements()) * sizeof(float);
  if (wholeSums > hw.gpuMem) {
    ctx.note(llvm::formatv(
        "--grad-reduce=auto: reducing every micro-batch (whole f32 gradient "
        "sums, {0} GiB, would not fit the GPU's {1} GiB)",
        wholeSums >> 30, hw.gpuMem >> 30));
    return GradReduce::MicroBatch;
  }
  std::string said;
  double best = 0;
  GradReduce chosen = GradReduce::MicroBatch;
  bool any = false;
  for (auto [reduce, name] : {std::pair{GradReduce::MicroBatch, "micro-batch"},
                              std::pair{GradReduce::Step, "step"}}) {
    ctx.training.gradReduce = reduce;
    auto seconds = predictedStepSeconds(imported, ctx, asGiven, hw, verifyEach);
    if (!seconds) {
      said += std::string(said.empty() ? "" : ", ") + name +
              " does not plan (" + llvm::toString(seconds.takeError()) + ")";
      continue;
    }
    said += (said.empty() ? "" : ", ") + std::string(name) + " " +
            llvm::formatv("{0}", llvm::format("%.4g", *seconds)).str() + " s";
    if (!any || *seconds < best) {
      best = *seconds;
      chosen = reduce;
      any = true;
    }
  }
  ctx.note(
      "--grad-reduce=auto: predicted step " + said + "; reducing " +
      (chosen == GradReduce::Step ? "once per step" : "every micro-batch"));
  return chosen;
}

} // namespace zinc::planning
