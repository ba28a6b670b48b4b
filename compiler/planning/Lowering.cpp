//===- Lowering.cpp - One configuration through the memory passes ---------===//
#include "zinc/planning/Lowering.h"
#include "zinc/passes/DoesNotFit.h"
#include "zinc/passes/SimulationProgram.h"
#include "zinc/passes/PassManager.h"

namespace zinc::planning {

llvm::Expected<std::shared_ptr<const TierLayout>>
runMemoryPasses(ir::Graph &g, const PlanConfig &config,
                const passes::PassContext &base,
                llvm::ArrayRef<llvm::StringRef> passes) {
  passes::PassContext trial = base;
  config.applyTo(trial.memory);
  trial.layout.reset();
  if (llvm::Error err = passes::runPassesNamed(g, trial, passes))
    return std::move(err);
  return std::move(trial.layout);
}

llvm::Expected<plan::Prediction> predictStep(const ir::Graph &g,
                                             const TierLayout &layout,
                                             const passes::PassContext &ctx) {
  return plan::simulate(
      simulationProgramOf(g, layout, static_cast<unsigned>(ctx.training.gradAccum)),
      *ctx.hardware);
}

llvm::Expected<llvm::Optional<Lowered>>
lowerAndPredict(ir::Graph &g, const PlanConfig &config,
                const passes::PassContext &base,
                llvm::ArrayRef<llvm::StringRef> passes) {
  auto layout = runMemoryPasses(g, config, base, passes);
  if (!layout) {
    if (llvm::Error err = passes::unlessDoesNotFit(layout.takeError()))
      return std::move(err);
    return llvm::None;
  }
  auto predicted = predictStep(g, **layout, base);
  if (!predicted)
    return predicted.takeError();
  return Lowered{std::move(*layout), std::move(*predicted)};
}

llvm::Expected<llvm::Optional<Candidate>>
lowerCandidate(const ir::Graph &homed, const PlanConfig &config,
               const passes::PassContext &base) {
  Candidate candidate;
  candidate.config = config;
  candidate.graph = homed.clone();
  auto lowered = lowerAndPredict(*candidate.graph, config, base, kMemoryPasses);
  if (!lowered)
    return lowered.takeError();
  if (!*lowered)
    return llvm::None;
  candidate.layout = std::move((*lowered)->layout);
  candidate.predicted = std::move((*lowered)->predicted);
  return std::move(candidate);
}

} // namespace zinc::planning
