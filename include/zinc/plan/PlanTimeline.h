//===- PlanTimeline.h - Showing a predicted step: summary and trace -------===//
//
// The compile report's `predicted` object and zinc-dump --format=trace: the
// predicted timeline as Chrome trace event JSON (Perfetto, chrome://tracing),
// one track per stream, each instruction a complete event labelled with its
// op, tensors and bytes, and a flow arrow for every event that orders two
// streams (from the signalling instruction's end to the waiting one's start).
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_PLAN_PLANTIMELINE_H
#define ZINC_PLAN_PLANTIMELINE_H

#include "zinc/plan/PlanSimulator.h"
#include "llvm/Support/JSON.h"

namespace zinc::plan {

/// {"step_seconds", "lower_bound_seconds", "overlap_efficiency",
///  "bottleneck", "busy_seconds": {stream: s}}.
llvm::json::Value predictionSummary(const Prediction &prediction);

/// One line for a person: each tier's proven peak against its capacity,
/// the predicted step, its lower bound and bottleneck, the overlap
/// efficiency, and the bytes each link moves per step.
std::string planSummary(const Plan &plan, const Prediction &prediction);

/// The predicted timeline of `plan` as a Chrome trace ({"traceEvents": ...}).
llvm::json::Value predictedTrace(const Plan &plan, const Prediction &prediction);

} // namespace zinc::plan

#endif
