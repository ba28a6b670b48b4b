//===- CompileDriver.h - The compiles around the memory planner's search --===//
#ifndef ZINC_PLANNING_COMPILEDRIVER_H
#define ZINC_PLANNING_COMPILEDRIVER_H

#include "Plan.pb.h"
#include "zinc/passes/PassManager.h"
#include "zinc/support/Hardware.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace zinc::planning {

/// Runs `pm` over `graph`; when the GPU tier overflows with the tile and
/// checkpoint passes aiming at their share of it (adaptive), they aim lower
/// and everything runs again from `imported` (the feedback from allocate to
/// the earlier passes). `retrying` is told each new divisor.
llvm::Error
runWithBudgetRetry(passes::PassManager &pm, passes::PassContext &ctx,
                   std::unique_ptr<ir::Graph> &graph, const ir::Graph *imported,
                   const MemoryOptions &asGiven,
                   llvm::function_ref<void(unsigned divisor)> retrying);

/// `graph` through the default pipeline under `ctx` (its notes silenced;
/// when tiles or checkpoints adapt, the budget retry from a copy of the
/// graph) and the emitter: the plan of a second compile inside this one.
/// `verifyEach`: the verifier after each pass, as in the compile around it.
llvm::Expected<plan::Plan>
planWithDefaultPipeline(std::unique_ptr<ir::Graph> graph,
                        passes::PassContext ctx, const Hardware &hw,
                        llvm::StringRef emitMode, bool verifyEach);

/// The inference form of a training plan's model (Plan.eval, zinc-run
/// --eval-data): --mode=infer's pipeline over the imported graph, for one
/// rank, with the training plan's precision, tier capacities, weights' home
/// and prefetch timing. Its notes are not printed: they would repeat the
/// training plan's.
llvm::Expected<plan::Plan> buildEvalPlan(std::unique_ptr<ir::Graph> graph,
                                         const passes::PassContext &trained,
                                         const MemoryOptions &asGiven,
                                         const Hardware &hw, bool verifyEach);

/// --grad-reduce=auto under ZeRO stages 2-3 with --grad-accum: reducing each
/// micro-batch's gradients costs N collectives a step, reducing whole f32
/// sums once costs a whole gradient's memory on every rank; which is faster
/// depends on the links, the compute and where that memory must live, so
/// both are planned and the cost model's faster one kept. One that does not
/// plan (its accumulators do not fit) is left out, saying why. The whole
/// sums are made where the gradients are, on the GPU: when they cannot all
/// live there, every micro-batch would move whole gradients off it, more
/// than the reductions it saves, so that reduction is not planned at all
/// (planning it would spill most of the sums every micro-batch).
/// `ctx.note` hears the predictions and the choice.
TrainingOptions::GradReduce chooseGradReduce(const ir::Graph &imported,
                                             passes::PassContext ctx,
                                             const MemoryOptions &asGiven,
                                             const Hardware &hw,
                                             bool verifyEach);

} // namespace zinc::planning

#endif
