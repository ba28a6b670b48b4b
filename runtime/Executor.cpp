//===- Executor.cpp - One step: a worker per stream, events between -------===//
//
// Each stream's instructions run in plan order on that stream's worker. An
// instruction's waits name how many signals of each event must have happened
// this step (Program::prepare counts the signals before it in plan order),
// so the streams order themselves exactly as the plan order does and the
// result is the serial one, bit for bit. Event counts live under one mutex;
// a worker blocked on a wait sleeps on its own condition variable, and a
// signal wakes only the workers whose wait it satisfies.
//
//===----------------------------------------------------------------------===//
#include "zinc/plan/PlanNames.h"
#include "ExecutorImpl.h"
#include <cstring>

namespace zinc::rt {

llvm::Error runInstruction(Program &program, PreparedInstruction &inst,
                           const StepContext &ctx, detail::LaneStats &stats) {
  if (inst.kind == InstructionKind::Kernel) {
    // The call's part of its stream's workspace: the stream runs one
    // instruction at a time, so every call starts at the beginning.
    cpu::Workspace workspace(inst.workspace, inst.workspaceBytes);
    cpu::KernelCall call{inst.source->op(),
                         inst.source->name(),
                         program.getPlan().opset_version(),
                         inst.attrs,
                         inst.inputs,
                         inst.outputs,
                         ctx.step,
                         ctx.seed,
                         &workspace};
    call.microBatch = ctx.microBatch;
    call.microBatches = ctx.microBatches;
    call.effects = inst.effects;
    call.comm = program.communicator();
    return inst.kernel(call);
  }
  uint64_t n = inst.copyBytes;
  if (!n)
    return llvm::Error::success();
  switch (inst.copyKind) {
  case CopyKind::Local:
  case CopyKind::H2D:
  case CopyKind::D2H:
    // The cpu backend's GPU tier is host memory: a transfer is a memcpy.
    std::memcpy(inst.copyDst, inst.copySrc, n);
    if (inst.copyKind == CopyKind::H2D)
      stats.bytes.h2d += n;
    else if (inst.copyKind == CopyKind::D2H)
      stats.bytes.d2h += n;
    return llvm::Error::success();
  case CopyKind::NvmeRead: {
    uint8_t *bounce = program.bounceBuffer();
    if (auto err = program.nvme()->read(
            inst.nvmeOffset, inst.nvmeDirect ? inst.copyDst : bounce, n))
      return err;
    if (!inst.nvmeDirect)
      std::memcpy(inst.copyDst, bounce, n);
    stats.bytes.nvmeRead += n;
    return llvm::Error::success();
  }
  case CopyKind::NvmeWrite: {
    const uint8_t *src = inst.copySrc;
    if (!inst.nvmeDirect) {
      std::memcpy(program.bounceBuffer(), src, n);
      src = program.bounceBuffer();
    }
    if (auto err = program.nvme()->write(inst.nvmeOffset, src, n))
      return err;
    stats.bytes.nvmeWrite += n;
    return llvm::Error::success();
  }
  }
  return llvm::Error::success();
}

ExecutionHooks::~ExecutionHooks() = default;

llvm::Error runOnHost(Program &program, PreparedInstruction &inst,
                      const StepContext &ctx, TransferBytes &bytes) {
  detail::LaneStats stats;
  llvm::Error err = runInstruction(program, inst, ctx, stats);
  bytes.h2d += stats.bytes.h2d;
  bytes.d2h += stats.bytes.d2h;
  bytes.nvmeRead += stats.bytes.nvmeRead;
  bytes.nvmeWrite += stats.bytes.nvmeWrite;
  return err;
}

llvm::Error nodeError(const PreparedInstruction &inst, llvm::Error err) {
  return addContext(std::move(err), "node '" + inst.source->name() + "' (" +
                                        inst.source->op() + ")");
}


Executor::Executor(std::unique_ptr<Impl> impl) : impl(std::move(impl)) {}

Executor::~Executor() { impl->stop(); }

llvm::Expected<std::unique_ptr<Executor>>
Executor::create(Program &program, const ExecutorOptions &opts) {
  // Checking numerics runs in plan order, so that the first non-finite
  // value in plan order is the one reported.
  bool serial = opts.serial || opts.checkNumerics;
  auto impl = std::make_unique<Impl>(program, serial, opts.seed);
  impl->hooks = opts.hooks;
  if (opts.hooks && opts.checkNumerics)
    return makeError("--check-numerics reads tensors in host memory; the cuda "
                     "backend does not support it yet (use --backend=cpu)");
  if (opts.checkNumerics)
    impl->checkedBelow = lastCheckedInstruction(program);
  if (!serial) {
    auto &prepared = program.instructions();
    if (program.nvme())
      markNvmeWriteBehind(program);
    impl->eventCounts.assign(program.getPlan().num_events(), 0);
    impl->starts.assign(prepared.size(), 0);
    impl->ends.assign(prepared.size(), 0);
    // Lanes in stream-number order, each with its instructions in plan order.
    int laneOf[plan::Stream_ARRAYSIZE];
    std::fill(std::begin(laneOf), std::end(laneOf), -1);
    std::vector<plan::Stream> present;
    for (const PreparedInstruction &inst : prepared)
      if (laneOf[inst.stream] < 0) {
        laneOf[inst.stream] = 0;
        present.push_back(inst.stream);
      }
    std::sort(present.begin(), present.end());
    impl->lanes.resize(present.size());
    for (unsigned i = 0; i < present.size(); ++i) {
      laneOf[present[i]] = i;
      impl->lanes[i].stream = present[i];
    }
    for (unsigned i = 0; i < prepared.size(); ++i)
      impl->lanes[laneOf[prepared[i].stream]].instructions.push_back(i);
  }
  std::unique_ptr<Executor> executor(new Executor(std::move(impl)));
  Impl &state = *executor->impl;
  for (Impl::Lane &lane : state.lanes) {
    try {
      lane.thread = std::thread([&state, &lane] { state.work(lane); });
    } catch (const std::system_error &e) {
      return makeError("cannot start the " + plan::streamName(lane.stream) +
                       " stream's thread: " + e.what());
    }
  }
  return executor;
}

llvm::Expected<StepResult> Executor::run(int64_t step, bool recordTimings,
                                         int64_t microBatch,
                                         int64_t microBatches) {
  // Workers read the position only after the step starts (under the mutex).
  impl->position(step, microBatch, microBatches);
  if (impl->serial || impl->lanes.empty())
    return impl->runSerial(recordTimings);
  return impl->runConcurrent(recordTimings);
}

unsigned Executor::numThreads() const { return impl->lanes.size(); }

llvm::Expected<StepResult> executeStep(Program &program, int64_t step,
                                       bool recordTimings, uint64_t seed,
                                       int64_t microBatch,
                                       int64_t microBatches) {
  Executor::Impl impl(program, /*serial=*/true, seed);
  impl.position(step, microBatch, microBatches);
  return impl.runSerial(recordTimings);
}

} // namespace zinc::rt
