//===- PlanSimulator.cpp - Cost model and discrete-event simulation -------===//
#include "zinc/plan/PlanSimulator.h"
#include "zinc/support/DType.h"
#include "zinc/support/Error.h"
#include "zinc/support/MatMulGeometry.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include <algorithm>

namespace zinc::plan {

namespace {

/// Prices instructions of one plan on one machine.
class CostModelOf {
public:
  CostModelOf(const Plan &plan, const Hardware &hw)
      : plan(plan), hw(hw), ranks(std::max(1u, plan.ranks())) {}

  /// Bytes the instruction moves: a transfer's tensor, a collective's
  /// whole tensors (all of a bucket's), a kernel's distinct operands.
  uint64_t bytes(const Instruction &inst) const {
    if (isTransfer(inst))
      return sizeOf(inst.inputs(0));
    if (isCollective(inst)) {
      uint64_t whole = 0;
      for (int id : inst.op() == "AllGather" ? inst.outputs() : inst.inputs())
        whole += sizeOf(id);
      return whole;
    }
    uint64_t total = 0;
    for (int id : inst.inputs())
      total += sizeOf(id);
    for (int id : inst.outputs())
      total += sizeOf(id);
    return total;
  }

  double seconds(const Instruction &inst, uint64_t moved) const {
    switch (inst.stream()) {
    case STREAM_H2D:
      return moved / hw.h2dPerRank(ranks);
    case STREAM_D2H:
      return moved / hw.d2hPerRank(ranks);
    case STREAM_NVME: {
      bool read = inst.inputs_size() && tierOf(inst.inputs(0)) == TIER_NVME;
      return moved / (read ? hw.nvmeReadPerRank(ranks) : hw.nvmeWritePerRank(ranks));
    }
    case STREAM_COLLECTIVE:
      if (isCollective(inst))
        return collectiveSeconds(inst, moved);
      return hw.kernelLaunchSeconds + moved / hw.gpuMemBandwidth;
    case STREAM_HOST: {
      if (isOptimizerStep(inst) && inst.inputs_size())
        return elementsOf(inst.inputs(0)) / hw.cpuAdamPerRank(ranks);
      return moved / hw.cpuMemBandwidthPerRank(ranks);
    }
    case STREAM_COMPUTE:
    default: {
      if (auto measured = hw.measuredKernelSeconds(inst.op(), largestOperand(inst)))
        return *measured;
      return hw.kernelSeconds(static_cast<double>(inst.flops()), static_cast<double>(moved),
                              isHalf(inst), isMatrixProductOp(inst.op()));
    }
    }
  }

private:
  static bool isTransfer(const Instruction &inst) {
    return inst.domain() == "zinc" && (inst.op() == "Copy" || inst.op() == "CopyInto") &&
           inst.inputs_size() && inst.stream() != STREAM_COMPUTE &&
           inst.stream() != STREAM_HOST && inst.stream() != STREAM_COLLECTIVE;
  }
  static bool isCollective(const Instruction &inst) {
    return inst.domain() == "zinc" &&
           (inst.op() == "AllGather" || inst.op() == "ReduceScatter" || inst.op() == "AllReduce");
  }
  static bool isOptimizerStep(const Instruction &inst) {
    return inst.domain() == "zinc" &&
           (inst.op() == "Adam" || inst.op() == "AdamW" || inst.op() == "SGD");
  }
  bool valid(int id) const { return id >= 0 && id < plan.tensors_size(); }
  uint64_t sizeOf(int id) const { return valid(id) ? plan.tensors(id).size_bytes() : 0; }
  Tier tierOf(int id) const { return valid(id) ? plan.tensors(id).tier() : TIER_GPU; }
  double elementsOf(int id) const {
    if (!valid(id))
      return 0;
    const Tensor &t = plan.tensors(id);
    double n = 1;
    for (int64_t d : t.shape())
      n *= static_cast<double>(d);
    return n;
  }
  /// Elements of the instruction's largest operand.
  double largestOperand(const Instruction &inst) const {
    double n = 0;
    for (int id : inst.inputs())
      n = std::max(n, elementsOf(id));
    for (int id : inst.outputs())
      n = std::max(n, elementsOf(id));
    return n;
  }
  /// Whether the kernel computes in 16 bits (tensor-core rates).
  bool isHalf(const Instruction &inst) const {
    int id = inst.outputs_size() ? inst.outputs(0) : inst.inputs_size() ? inst.inputs(0) : -1;
    if (!valid(id))
      return false;
    auto dtype = dtypeFromOnnx(plan.tensors(id).dtype());
    return dtype && (*dtype == DType::F16 || *dtype == DType::BF16);
  }
  /// A ring over the ranks: each step moves 1/ranks of the bytes and pays
  /// the latency once. A bucket is one collective: one latency per step for
  /// all its tensors (they go as one group).
  double collectiveSeconds(const Instruction &inst, uint64_t whole) const {
    if (ranks <= 1)
      return hw.kernelLaunchSeconds;
    bool withinNode = ranks <= hw.gpusPerNode;
    double bandwidth = withinNode ? hw.intraNodeBandwidth : hw.interNodeBandwidth;
    double latency = withinNode ? hw.intraNodeLatency : hw.interNodeLatency;
    double steps = ranks - 1;
    double one = steps / ranks * whole / bandwidth + steps * latency;
    return inst.op() == "AllReduce" ? 2 * one : one;
  }

  const Plan &plan;
  const Hardware &hw;
  unsigned ranks;
};

} // namespace

llvm::Expected<Prediction> simulatePlan(const Plan &plan, const Hardware &hw,
                                        CostModel model) {
  Prediction out;
  out.timeline.resize(plan.instructions_size());
  CostModelOf costs(plan, hw);
  std::array<double, kNumStreams> streamFree{};
  std::vector<double> signalled(plan.num_events(), 0.0);
  std::vector<bool> everSignalled(plan.num_events(), false);
  // Plan order is a valid sequential order (every event is signalled before
  // it is waited on), so one pass in plan order places each instruction at
  // the earliest time its stream and its events allow: exactly what the
  // per-stream executors do.
  for (int i = 0; i < plan.instructions_size(); ++i) {
    const Instruction &inst = plan.instructions(i);
    unsigned stream = static_cast<unsigned>(inst.stream());
    if (stream >= kNumStreams)
      return makeError("instruction " + llvm::Twine(i) + " ('" + inst.name() +
                       "') is on unknown stream " + llvm::Twine(stream));
    double start = streamFree[stream];
    double eventWait = model == CostModel::InstructionCount ? 0 : hw.eventWaitSeconds;
    for (uint32_t e : inst.wait_events()) {
      if (e >= signalled.size())
        return makeError("instruction " + llvm::Twine(i) + " ('" + inst.name() +
                         "') waits on event " + llvm::Twine(e) + " of " +
                         llvm::Twine(signalled.size()));
      if (!everSignalled[e])
        return makeError("instruction " + llvm::Twine(i) + " ('" + inst.name() +
                         "') waits on event " + llvm::Twine(e) +
                         ", which no instruction before it signals");
      // A stream that reaches the wait before the signal blocks, and pays
      // its wake-up; one that arrives later finds the event set.
      if (signalled[e] > streamFree[stream])
        start = std::max(start, signalled[e] + eventWait);
    }
    for (const auto *ids : {&inst.inputs(), &inst.outputs()})
      for (int id : *ids)
        if (id < -1 || id >= plan.tensors_size())
          return makeError("instruction " + llvm::Twine(i) + " ('" + inst.name() +
                           "') names tensor " + llvm::Twine(id) + " of " +
                           llvm::Twine(plan.tensors_size()));
    PredictedInstruction &p = out.timeline[i];
    p.bytes = costs.bytes(inst);
    p.flops = inst.flops();
    double cost = model == CostModel::InstructionCount ? 1e-6 : costs.seconds(inst, p.bytes);
    p.start = start;
    p.end = start + cost;
    streamFree[stream] = p.end;
    out.busySeconds[stream] += cost;
    for (uint32_t e : inst.signal_events()) {
      if (e >= signalled.size())
        return makeError("instruction " + llvm::Twine(i) + " ('" + inst.name() +
                         "') signals event " + llvm::Twine(e) + " of " +
                         llvm::Twine(signalled.size()));
      signalled[e] = p.end;
      everSignalled[e] = true;
    }
    out.stepSeconds = std::max(out.stepSeconds, p.end);
  }
  for (unsigned s = 0; s < kNumStreams; ++s)
    if (out.busySeconds[s] > out.lowerBoundSeconds) {
      out.lowerBoundSeconds = out.busySeconds[s];
      out.bottleneck = static_cast<Stream>(s);
    }
  return out;
}

llvm::Expected<Hardware> planHardware(const Plan &plan) {
  if (plan.hardware_json().empty())
    return makeError("the plan holds no hardware description (compiled before the cost "
                     "model): compile it again");
  return parseHardwareJson(plan.hardware_json(), "the plan's hardware description");
}

} // namespace zinc::plan
