//===- PlanTimeline.cpp - Predicted step as a summary and a Chrome trace --===//
#include "zinc/plan/PlanTimeline.h"
#include "zinc/plan/PlanNames.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include <algorithm>
#include <cmath>

namespace zinc::plan {

namespace {

/// Chrome trace times are microseconds; keep nanoseconds.
double micros(double seconds) { return std::round(seconds * 1e9) / 1e3; }

std::string tensorName(const Plan &plan, int id) {
  return id >= 0 && id < plan.tensors_size() ? plan.tensors(id).name() : std::string("-");
}

bool movesData(Stream stream) {
  return stream == STREAM_H2D || stream == STREAM_D2H || stream == STREAM_NVME ||
         stream == STREAM_COLLECTIVE;
}

} // namespace

llvm::json::Value predictionSummary(const Prediction &prediction) {
  llvm::json::Object busy;
  for (unsigned s = 0; s < kNumStreams; ++s)
    busy[streamName(static_cast<Stream>(s))] = prediction.busySeconds[s];
  return llvm::json::Object{
      {"step_seconds", prediction.stepSeconds},
      {"micro_batches", prediction.microBatches},
      {"micro_batch_seconds", prediction.stepSeconds / std::max(1u, prediction.microBatches)},
      {"lower_bound_seconds", prediction.lowerBoundSeconds},
      {"overlap_efficiency", prediction.overlapEfficiency()},
      {"model_flops_utilization", prediction.modelFlopsUtilization},
      {"bottleneck", streamName(prediction.bottleneck)},
      {"busy_seconds", std::move(busy)}};
}

std::string planSummary(const Plan &plan, const Prediction &prediction) {
  std::string text;
  for (const TierInfo &t : plan.tiers()) {
    text += std::string(text.empty() ? "" : ", ") + tierName(t.tier()) + " " +
            bytesText(t.peak());
    if (t.capacity())
      text += " of " + bytesText(t.capacity());
  }
  text += "; predicted step " + secondsText(prediction.stepSeconds);
  if (prediction.microBatches > 1)
    text += " (" + std::to_string(prediction.microBatches) + " micro-batches, " +
            secondsText(prediction.stepSeconds / prediction.microBatches) + " each)";
  text += " (lower bound " + secondsText(prediction.lowerBoundSeconds) + ", " +
          streamName(prediction.bottleneck) + "-bound), overlap efficiency " +
          llvm::formatv("{0:f2}", prediction.overlapEfficiency()).str();
  if (prediction.modelFlopsUtilization > 0)
    text += ", model FLOPs utilization " +
            llvm::formatv("{0:f3}", prediction.modelFlopsUtilization).str();
  uint64_t h2d = 0, d2h = 0, nvmeRead = 0, nvmeWrite = 0, collective = 0;
  for (int i = 0; i < plan.instructions_size(); ++i) {
    const Instruction &inst = plan.instructions(i);
    uint64_t bytes = prediction.timeline[i].bytes;
    switch (inst.stream()) {
    case STREAM_H2D: h2d += bytes; break;
    case STREAM_D2H: d2h += bytes; break;
    case STREAM_NVME: {
      int src = inst.inputs_size() ? inst.inputs(0) : -1;
      bool read = src >= 0 && src < plan.tensors_size() && plan.tensors(src).tier() == TIER_NVME;
      (read ? nvmeRead : nvmeWrite) += bytes;
      break;
    }
    case STREAM_COLLECTIVE: collective += bytes; break;
    default: break;
    }
  }
  std::string moved;
  for (auto [name, bytes] : {std::pair{"h2d", h2d}, std::pair{"d2h", d2h},
                             std::pair{"nvme read", nvmeRead}, std::pair{"nvme write", nvmeWrite},
                             std::pair{"collectives", collective}})
    if (bytes)
      moved += std::string(moved.empty() ? "" : ", ") + name + " " + bytesText(bytes);
  if (!moved.empty())
    text += "; per step: " + moved;
  return text;
}

llvm::json::Value predictedTrace(const Plan &plan, const Prediction &prediction) {
  llvm::json::Array events;
  events.push_back(llvm::json::Object{{"name", "process_name"},
                                      {"ph", "M"},
                                      {"pid", 0},
                                      {"tid", 0},
                                      {"args", llvm::json::Object{{"name", "zinc predicted step"}}}});
  // One track per stream the plan uses, named and ordered as zinc-run's
  // measured trace names and orders them.
  bool present[kNumStreams] = {};
  for (const Instruction &inst : plan.instructions())
    if (static_cast<unsigned>(inst.stream()) < kNumStreams)
      present[inst.stream()] = true;
  for (unsigned s = 0; s < kNumStreams; ++s) {
    if (!present[s])
      continue;
    events.push_back(llvm::json::Object{
        {"name", "thread_name"},
        {"ph", "M"},
        {"pid", 0},
        {"tid", s},
        {"args", llvm::json::Object{{"name", streamName(static_cast<Stream>(s))}}}});
    events.push_back(llvm::json::Object{{"name", "thread_sort_index"},
                                        {"ph", "M"},
                                        {"pid", 0},
                                        {"tid", s},
                                        {"args", llvm::json::Object{{"sort_index", s}}}});
  }
  // Which instruction signals each event, for the flow arrows.
  std::vector<int> signaller(plan.num_events(), -1);
  for (int i = 0; i < plan.instructions_size(); ++i) {
    const Instruction &inst = plan.instructions(i);
    const PredictedInstruction &p = prediction.timeline[i];
    llvm::json::Array inputs, outputs;
    for (int id : inst.inputs())
      inputs.push_back(tensorName(plan, id));
    for (int id : inst.outputs())
      outputs.push_back(tensorName(plan, id));
    std::string name = inst.name();
    if (movesData(inst.stream()) && inst.inputs_size())
      name = inst.op() + " " + tensorName(plan, inst.inputs(0)) + " (" + bytesText(p.bytes) + ")";
    events.push_back(llvm::json::Object{
        {"name", name},
        {"cat", inst.op()},
        {"ph", "X"},
        {"pid", 0},
        {"tid", static_cast<int>(inst.stream())},
        {"ts", micros(p.start)},
        // The rounded end less the rounded start, so that back-to-back
        // instructions of a stream meet exactly.
        {"dur", micros(p.end) - micros(p.start)},
        {"args", llvm::json::Object{{"instruction", i},
                                    {"node", inst.name()},
                                    {"op", inst.op()},
                                    {"bytes", static_cast<int64_t>(p.bytes)},
                                    {"flops", static_cast<int64_t>(p.flops)},
                                    {"inputs", std::move(inputs)},
                                    {"outputs", std::move(outputs)}}}});
    for (uint32_t e : inst.wait_events()) {
      if (e >= signaller.size() || signaller[e] < 0)
        continue;
      const Instruction &from = plan.instructions(signaller[e]);
      if (from.stream() == inst.stream())
        continue;
      // One flow per (event, waiter): ids must be unique per pair.
      int64_t id = static_cast<int64_t>(e) * plan.instructions_size() + i;
      std::string label = "event " + std::to_string(e);
      events.push_back(llvm::json::Object{{"name", label},
                                          {"cat", "event"},
                                          {"ph", "s"},
                                          {"id", id},
                                          {"pid", 0},
                                          {"tid", static_cast<int>(from.stream())},
                                          // Inside the signalling slice (a
                                          // nanosecond before its end), so
                                          // viewers bind the arrow to it and
                                          // not to the next one.
                                          {"ts", std::max(micros(prediction.timeline[signaller[e]].start),
                                                          micros(prediction.timeline[signaller[e]].end) - 0.001)}});
      events.push_back(llvm::json::Object{{"name", label},
                                          {"cat", "event"},
                                          {"ph", "f"},
                                          {"bp", "e"},
                                          {"id", id},
                                          {"pid", 0},
                                          {"tid", static_cast<int>(inst.stream())},
                                          {"ts", micros(p.start)}});
    }
    for (uint32_t e : inst.signal_events())
      if (e < signaller.size())
        signaller[e] = i;
  }
  return llvm::json::Object{
      {"traceEvents", std::move(events)},
      {"displayTimeUnit", "ms"},
      {"otherData", llvm::json::Object{{"predicted", predictionSummary(prediction)},
                                       {"hw", plan.hw()}}}};
}

} // namespace zinc::plan
