//===- Lowering.h - One configuration through the memory passes -----------===//
//
// Lowering is the one way the planner turns decisions into a plan: the
// passes insert-transfers, spill and allocate run under a copy of the
// compilation's context with the configuration applied, through the pass
// manager's instrumentation (the verifier, --print-after and --time-passes
// reach every trial), and the cost model predicts the result without
// writing a plan file. A tier that overflows is a DoesNotFit, which the
// search handles; every other error is the compile's.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_PLANNING_LOWERING_H
#define ZINC_PLANNING_LOWERING_H

#include "zinc/planning/PlanConfig.h"

namespace zinc::planning {

/// The passes of a lowering, in their order.
inline constexpr llvm::StringRef kMemoryPasses[] = {"insert-transfers", "spill",
                                                    "allocate"};

/// Runs `passes` (some of kMemoryPasses, in order) on `g` under `base`
/// with `config`'s decisions. Returns the layout the last of them left
/// (allocate's proof; spill's packings when it is last), or the first
/// error.
llvm::Expected<std::shared_ptr<const TierLayout>>
runMemoryPasses(ir::Graph &g, const PlanConfig &config,
                const passes::PassContext &base,
                llvm::ArrayRef<llvm::StringRef> passes);

/// The cost model's prediction of one step of `g` laid out as `layout`.
llvm::Expected<plan::Prediction> predictStep(const ir::Graph &g,
                                             const TierLayout &layout,
                                             const passes::PassContext &ctx);

/// What lowering proved and predicts.
struct Lowered {
  std::shared_ptr<const TierLayout> layout;
  plan::Prediction predicted;
};

/// Runs `passes` (ending with allocate) on `g` in place and predicts the
/// result; None when it does not fit.
llvm::Expected<llvm::Optional<Lowered>>
lowerAndPredict(ir::Graph &g, const PlanConfig &config,
                const passes::PassContext &base,
                llvm::ArrayRef<llvm::StringRef> passes);

/// `config` lowered on a copy of `homed` (its homes placed as `config`
/// says) and predicted; None when it does not fit.
llvm::Expected<llvm::Optional<Candidate>>
lowerCandidate(const ir::Graph &homed, const PlanConfig &config,
               const passes::PassContext &base);

} // namespace zinc::planning

#endif
