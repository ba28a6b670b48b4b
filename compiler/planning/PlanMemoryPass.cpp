//===- PlanMemoryPass.cpp - plan-memory: homes, transfers, spills, layout -===//
//
// The pipeline's one memory pass: it runs insert-transfers, spill and
// allocate itself, on every configuration the search lowers
// (SearchDriver.h), so those three are its nested pipeline and not passes
// of the default pipeline of their own.
//
//===----------------------------------------------------------------------===//
#include "zinc/planning/SearchDriver.h"

namespace zinc::passes {
namespace {

class PlanMemory : public Pass {
public:
  llvm::StringRef getName() const override { return "Plan Memory"; }
  llvm::StringRef getArgument() const override { return "plan-memory"; }
  llvm::StringRef getNestedPipeline() const override {
    return "insert-transfers,spill,allocate";
  }
  llvm::Expected<bool> run(ir::Graph &g, PassContext &ctx) override {
    if (llvm::Error err = planning::planMemory(g, ctx))
      return std::move(err);
    return true;
  }
};

} // namespace

std::unique_ptr<Pass> createPlanMemoryPass() {
  return std::make_unique<PlanMemory>();
}

} // namespace zinc::passes
