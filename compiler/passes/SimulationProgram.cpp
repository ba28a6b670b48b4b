//===- SimulationProgram.cpp - A lowered graph's facts for the simulation -===//
#include "zinc/passes/SimulationProgram.h"
#include "zinc/passes/NodeFlops.h"
#include "zinc/passes/PlanEnums.h"
#include "zinc/passes/StreamEvents.h"
#include "zinc/passes/UpdatePhase.h"
#include "zinc/support/MatMulGeometry.h"
#include "llvm/ADT/DenseSet.h"
#include <algorithm>
#include <future>

namespace zinc {

namespace {
/// As the plan's tensors give it: the product of the dimensions, in double.
double elementsOf(const ir::Value *v) {
  if (!v)
    return 0;
  double n = 1;
  for (int64_t d : v->shape)
    n *= static_cast<double>(d);
  return n;
}

uint64_t sizeOf(const ir::Value *v) { return v ? v->byteSize() : 0; }

/// The (instruction, event) pairs as per-instruction runs: the plan lists
/// each instruction's events in the order they were found.
void addEvents(llvm::ArrayRef<std::pair<uint32_t, uint32_t>> pairs,
               std::vector<plan::SimInstruction> &instructions,
               uint32_t plan::SimInstruction::*first,
               uint32_t plan::SimInstruction::*count,
               std::vector<uint32_t> &events) {
  for (auto [inst, event] : pairs)
    ++(instructions[inst].*count);
  uint32_t at = 0;
  for (plan::SimInstruction &inst : instructions) {
    inst.*first = at;
    at += inst.*count;
  }
  events.resize(at);
  std::vector<uint32_t> filled(instructions.size(), 0);
  for (auto [inst, event] : pairs)
    events[instructions[inst].*first + filled[inst]++] = event;
}
} // namespace

plan::SimProgram simulationProgramOf(const ir::Graph &g, const TierLayout &layout,
                                     unsigned gradAccum) {
  // The events need only the order and the layout: on big graphs they are
  // found on a second thread while the instructions' facts are gathered.
  std::future<StreamEvents> events = synchronizeStreamsAsync(g, layout);

  plan::SimProgram program;
  program.ranks = std::max(1u, g.ranks);
  program.gradAccum = gradAccum > 1 ? gradAccum : 1;
  llvm::DenseSet<const ir::Node *> updateOnly;
  if (gradAccum > 1)
    updateOnly = passes::updateOnlyNodes(g);
  auto bytesOf = [&](const ir::Value *v) {
    return plan::SimBytes{toPlanTier(v->tier), layout.offsets.lookup(v), v->byteSize()};
  };
  program.instructions.reserve(g.numNodes());
  for (const ir::Node *n : g.nodes()) {
    plan::SimInstruction s;
    s.name = n->name;
    s.op = n->opType;
    s.stream = toPlanStream(n->stream);
    const bool hasInputs = !n->inputs.empty();
    s.kind = plan::simKindOf(n->domain, n->opType, s.stream, hasInputs);
    s.updateOnly = updateOnly.count(n);
    const bool kernel =
        n->stream == ir::Stream::Compute || n->stream == ir::Stream::Host;
    if (kernel) {
      const ir::Value *first = !n->outputs.empty() ? n->outputs[0]
                               : hasInputs        ? n->inputs[0]
                                                  : nullptr;
      s.half = first && (first->dtype == DType::F16 || first->dtype == DType::BF16);
      s.matrixProduct = isMatrixProductOp(n->opType);
      s.recompute = llvm::StringRef(n->name).contains("@recompute");
      s.flops = passes::estimateFlops(*n);
      for (const ir::Value *in : n->inputs)
        s.largestOperand = std::max(s.largestOperand, elementsOf(in));
      for (const ir::Value *out : n->outputs)
        s.largestOperand = std::max(s.largestOperand, elementsOf(out));
    }
    switch (s.kind) {
    case plan::SimKind::Transfer:
      s.bytes = sizeOf(n->inputs[0]);
      break;
    case plan::SimKind::Collective:
    case plan::SimKind::AllReduce:
      if (n->opType == "AllGather")
        for (const ir::Value *out : n->outputs)
          s.bytes += sizeOf(out);
      else
        for (const ir::Value *in : n->inputs)
          s.bytes += sizeOf(in);
      break;
    default:
      for (const ir::Value *in : n->inputs)
        s.bytes += sizeOf(in);
      for (const ir::Value *out : n->outputs)
        s.bytes += sizeOf(out);
    }
    if (s.kind == plan::SimKind::OptimizerStep)
      s.updatedElements = elementsOf(n->inputs[0]);
    if (s.stream == plan::STREAM_NVME) {
      const ir::Value *source = hasInputs ? n->inputs[0] : nullptr;
      const ir::Value *destination =
          n->opType == "CopyInto"
              ? (n->inputs.size() > 1 ? n->inputs[1] : nullptr)
              : (!n->outputs.empty() ? n->outputs[0] : nullptr);
      plan::SimBytes from, to;
      if (source)
        from = bytesOf(source);
      if (destination)
        to = bytesOf(destination);
      plan::setNvmeFacts(program, s, source ? &from : nullptr,
                         destination ? &to : nullptr, source == destination);
    }
    program.instructions.push_back(s);
  }

  StreamEvents found = events.get();
  program.numEvents = found.numEvents;
  addEvents(found.waits, program.instructions, &plan::SimInstruction::firstWait,
            &plan::SimInstruction::numWaits, program.waits);
  addEvents(found.signals, program.instructions, &plan::SimInstruction::firstSignal,
            &plan::SimInstruction::numSignals, program.signals);
  return program;
}

} // namespace zinc
