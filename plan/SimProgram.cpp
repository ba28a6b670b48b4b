//===- SimProgram.cpp - A plan's instructions as the simulation reads them ===//
#include "zinc/plan/SimProgram.h"
#include "zinc/support/DType.h"
#include "zinc/support/Error.h"
#include "zinc/support/MatMulGeometry.h"
#include "llvm/ADT/Twine.h"
#include <algorithm>

namespace zinc::plan {

SimKind simKindOf(llvm::StringRef domain, llvm::StringRef op, Stream stream,
                  bool hasInputs) {
  if (domain != "zinc")
    return SimKind::Kernel;
  if ((op == "Copy" || op == "CopyInto") && hasInputs &&
      stream != STREAM_COMPUTE && stream != STREAM_HOST &&
      stream != STREAM_COLLECTIVE)
    return SimKind::Transfer;
  if (op == "AllGather" || op == "ReduceScatter")
    return SimKind::Collective;
  if (op == "AllReduce")
    return SimKind::AllReduce;
  if ((op == "Adam" || op == "AdamW" || op == "SGD") && hasInputs)
    return SimKind::OptimizerStep;
  return SimKind::Kernel;
}

void setNvmeFacts(SimProgram &program, SimInstruction &inst, const SimBytes *source,
                  const SimBytes *destination, bool destinationIsSource) {
  inst.readsTier = source && source->tier == TIER_NVME;
  const SimBytes *tierSide = inst.readsTier ? source : destination;
  const SimBytes *hostSide = inst.readsTier ? destination : source;
  inst.directNvme = inst.stream == STREAM_NVME &&
                    inst.kind == SimKind::Transfer && tierSide &&
                    tierSide->tier == TIER_NVME && hostSide &&
                    hostSide->tier != TIER_NVME && hostSide->size > 0 &&
                    hostSide->offset % kSimSector == 0;
  if (!inst.directNvme)
    return;
  inst.fillsHost = inst.readsTier || destinationIsSource;
  inst.sides = static_cast<uint32_t>(program.nvmeSides.size());
  program.nvmeSides.push_back({*tierSide, *hostSide});
}

llvm::Expected<SimProgram> simProgramOfPlan(const Plan &plan) {
  SimProgram program;
  program.ranks = std::max(1u, plan.ranks());
  program.gradAccum = plan.grad_accum() > 1 ? plan.grad_accum() : 1;
  program.numEvents = plan.num_events();
  const int numTensors = plan.tensors_size();
  auto valid = [&](int id) { return id >= 0 && id < numTensors; };
  auto sizeOf = [&](int id) -> uint64_t {
    return valid(id) ? plan.tensors(id).size_bytes() : 0;
  };
  auto elementsOf = [&](int id) {
    if (!valid(id))
      return 0.0;
    double n = 1;
    for (int64_t d : plan.tensors(id).shape())
      n *= static_cast<double>(d);
    return n;
  };
  auto bytesOf = [&](int id) {
    const Tensor &t = plan.tensors(id);
    return SimBytes{t.tier(), t.offset(), t.size_bytes()};
  };
  program.instructions.reserve(plan.instructions_size());
  for (int i = 0; i < plan.instructions_size(); ++i) {
    const Instruction &inst = plan.instructions(i);
    auto fail = [&](const llvm::Twine &what) {
      return makeError("instruction " + llvm::Twine(i) + " ('" + inst.name() +
                       "') " + what);
    };
    if (static_cast<unsigned>(inst.stream()) >= 6)
      return fail("is on unknown stream " + llvm::Twine(inst.stream()));
    for (const auto *ids : {&inst.inputs(), &inst.outputs()})
      for (int id : *ids)
        if (id < -1 || id >= numTensors)
          return fail("names tensor " + llvm::Twine(id) + " of " +
                      llvm::Twine(numTensors));
    for (uint32_t e : inst.wait_events())
      if (e >= program.numEvents)
        return fail("waits on event " + llvm::Twine(e) + " of " +
                    llvm::Twine(program.numEvents));
    for (uint32_t e : inst.signal_events())
      if (e >= program.numEvents)
        return fail("signals event " + llvm::Twine(e) + " of " +
                    llvm::Twine(program.numEvents));

    SimInstruction s;
    s.name = inst.name();
    s.op = inst.op();
    s.stream = inst.stream();
    const bool hasInputs = inst.inputs_size() > 0;
    s.kind = simKindOf(inst.domain(), inst.op(), s.stream, hasInputs);
    s.updateOnly = inst.update_only();
    const bool kernel = s.stream == STREAM_COMPUTE || s.stream == STREAM_HOST;
    if (kernel) {
      int first = inst.outputs_size() ? inst.outputs(0) : hasInputs ? inst.inputs(0) : -1;
      if (valid(first)) {
        auto dtype = dtypeFromOnnx(plan.tensors(first).dtype());
        s.half = dtype && (*dtype == DType::F16 || *dtype == DType::BF16);
      }
      s.matrixProduct = isMatrixProductOp(inst.op());
      s.recompute = llvm::StringRef(inst.name()).contains("@recompute");
      for (const auto *ids : {&inst.inputs(), &inst.outputs()})
        for (int id : *ids)
          s.largestOperand = std::max(s.largestOperand, elementsOf(id));
    }
    switch (s.kind) {
    case SimKind::Transfer:
      s.bytes = sizeOf(inst.inputs(0));
      break;
    case SimKind::Collective:
    case SimKind::AllReduce:
      for (int id : inst.op() == "AllGather" ? inst.outputs() : inst.inputs())
        s.bytes += sizeOf(id);
      break;
    default:
      for (int id : inst.inputs())
        s.bytes += sizeOf(id);
      for (int id : inst.outputs())
        s.bytes += sizeOf(id);
    }
    s.flops = inst.flops();
    if (s.kind == SimKind::OptimizerStep)
      s.updatedElements = elementsOf(inst.inputs(0));
    if (s.stream == STREAM_NVME) {
      int source = hasInputs ? inst.inputs(0) : -1;
      int destination = inst.op() == "CopyInto"
                            ? (inst.inputs_size() > 1 ? inst.inputs(1) : -1)
                            : (inst.outputs_size() ? inst.outputs(0) : -1);
      SimBytes from, to;
      if (valid(source))
        from = bytesOf(source);
      if (valid(destination))
        to = bytesOf(destination);
      setNvmeFacts(program, s, valid(source) ? &from : nullptr,
                   valid(destination) ? &to : nullptr, source == destination);
    }
    s.firstWait = static_cast<uint32_t>(program.waits.size());
    s.numWaits = static_cast<uint32_t>(inst.wait_events_size());
    program.waits.insert(program.waits.end(), inst.wait_events().begin(),
                         inst.wait_events().end());
    s.firstSignal = static_cast<uint32_t>(program.signals.size());
    s.numSignals = static_cast<uint32_t>(inst.signal_events_size());
    program.signals.insert(program.signals.end(), inst.signal_events().begin(),
                           inst.signal_events().end());
    program.instructions.push_back(s);
  }
  return program;
}

} // namespace zinc::plan
