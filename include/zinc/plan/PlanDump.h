//===- PlanDump.h - Human- and machine-readable views of a plan -----------===//
#ifndef ZINC_PLAN_PLANDUMP_H
#define ZINC_PLAN_PLANDUMP_H

#include "zinc/plan/PlanFile.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

namespace zinc::plan {

/// Tiers, tensors with their buffers, then each stream's instructions in
/// order. Stable enough for FileCheck.
void dumpPlanText(const Plan &plan, llvm::raw_ostream &os);
/// The same content as data.
llvm::json::Value planToJson(const Plan &plan);

} // namespace zinc::plan

#endif
