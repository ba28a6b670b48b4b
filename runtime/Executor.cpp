//===- Executor.cpp - One step: a worker per stream, events between -------===//
//
// Each stream's instructions run in plan order on that stream's worker. An
// instruction's waits name how many signals of each event must have happened
// this step (Program::prepare counts the signals before it in plan order),
// so the streams order themselves exactly as the plan order does and the
// result is the serial one, bit for bit. Event counts live under one mutex
// with one condition variable: a step has few events per instruction and
// the waits are long (transfers, kernels), so simplicity wins over a lock
// per event.
//
//===----------------------------------------------------------------------===//
#include "zinc/runtime/Executor.h"
#include "zinc/support/Error.h"
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

namespace zinc::rt {

using Clock = std::chrono::steady_clock;

namespace {

/// What one worker (or the serial loop) measured this step.
struct LaneStats {
  TransferBytes bytes;

  void merge(const LaneStats &o) {
    bytes.h2d += o.bytes.h2d;
    bytes.d2h += o.bytes.d2h;
    bytes.nvmeRead += o.bytes.nvmeRead;
    bytes.nvmeWrite += o.bytes.nvmeWrite;
  }
};

} // namespace

/// Runs one instruction: its kernel, or its copy between tiers.
static llvm::Error runInstruction(Program &program, PreparedInstruction &inst,
                                  int64_t step, uint64_t seed,
                                  LaneStats &stats) {
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
                         step,
                         seed,
                         &workspace};
    call.effects = inst.effects;
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

static llvm::Error nodeError(const PreparedInstruction &inst, llvm::Error err) {
  return addContext(std::move(err), "node '" + inst.source->name() + "' (" +
                                        inst.source->op() + ")");
}

struct Executor::Impl {
  /// One stream's worker.
  struct Lane {
    plan::Stream stream = plan::STREAM_COMPUTE;
    std::vector<unsigned> instructions; // plan indices, in plan order
    LaneStats stats;
    /// Plan index and message of the instruction that failed, if any.
    bool failed = false;
    unsigned failedAt = 0;
    std::string error;
    std::thread thread;
  };

  Program &program;
  bool serial;
  /// The run's seed (ExecutorOptions::seed), passed to every kernel.
  uint64_t seed;
  std::vector<Lane> lanes;
  /// Per plan index, when it started and ended (only while recording).
  std::vector<double> starts, ends;

  std::mutex mutex;
  /// Wakes workers: a step starts, an event is signalled, a stream failed,
  /// or the executor stops.
  std::condition_variable wake;
  /// Wakes the main thread when a worker finishes its step.
  std::condition_variable done;
  uint64_t generation = 0;
  unsigned finished = 0;
  bool stopping = false;
  std::atomic<bool> failed{false};
  std::vector<uint32_t> eventCounts;
  int64_t stepNumber = 1;
  bool recording = false;
  Clock::time_point stepStart;

  Impl(Program &program, bool serial, uint64_t seed)
      : program(program), serial(serial), seed(seed) {}

  double since(Clock::time_point t) const {
    return std::chrono::duration<double>(t - stepStart).count();
  }

  bool satisfied(const PreparedInstruction &inst) const {
    for (auto [event, count] : inst.waits)
      if (eventCounts[event] < count)
        return false;
    return true;
  }

  void runLane(Lane &lane) {
    auto &prepared = program.instructions();
    for (unsigned index : lane.instructions) {
      PreparedInstruction &inst = prepared[index];
      if (!inst.waits.empty()) {
        std::unique_lock<std::mutex> lock(mutex);
        wake.wait(lock, [&] { return failed.load() || satisfied(inst); });
      }
      if (failed.load())
        return;
      if (recording)
        starts[index] = since(Clock::now());
      if (llvm::Error err =
              runInstruction(program, inst, stepNumber, seed, lane.stats)) {
        std::string message = llvm::toString(nodeError(inst, std::move(err)));
        {
          std::lock_guard<std::mutex> lock(mutex);
          lane.failed = true;
          lane.failedAt = index;
          lane.error = std::move(message);
          failed = true;
        }
        wake.notify_all();
        return;
      }
      if (recording)
        ends[index] = since(Clock::now());
      if (!inst.signals.empty()) {
        {
          std::lock_guard<std::mutex> lock(mutex);
          for (uint32_t e : inst.signals)
            ++eventCounts[e];
        }
        wake.notify_all();
      }
    }
  }

  void work(Lane &lane) {
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex);
        wake.wait(lock, [&] { return stopping || generation != seen; });
        if (stopping)
          return;
        seen = generation;
      }
      lane.stats = LaneStats();
      runLane(lane);
      {
        std::lock_guard<std::mutex> lock(mutex);
        ++finished;
      }
      done.notify_one();
    }
  }

  llvm::Expected<StepResult> runSerial(int64_t step, bool record) {
    StepResult result;
    stepStart = Clock::now();
    LaneStats stats;
    unsigned index = 0;
    for (PreparedInstruction &inst : program.instructions()) {
      double start = record ? since(Clock::now()) : 0;
      if (llvm::Error err = runInstruction(program, inst, step, seed, stats))
        return nodeError(inst, std::move(err));
      if (record)
        result.timings.push_back(
            {index, inst.stream, start, since(Clock::now())});
      ++index;
    }
    result.seconds = since(Clock::now());
    if (auto err = fill(result, stats))
      return err;
    return result;
  }

  /// The step's counts, and the peaks read from the arenas now that every
  /// stream is through.
  llvm::Error fill(StepResult &result, const LaneStats &stats) {
    result.bytes = stats.bytes;
    auto gpu = program.gpuArena().touchedBytes();
    if (!gpu)
      return gpu.takeError();
    auto cpu = program.cpuArena().touchedBytes();
    if (!cpu)
      return cpu.takeError();
    result.measuredGpuPeak = *gpu;
    result.measuredCpuPeak = *cpu;
    return llvm::Error::success();
  }

  llvm::Expected<StepResult> runConcurrent(int64_t step, bool record) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      std::fill(eventCounts.begin(), eventCounts.end(), 0);
      failed = false;
      finished = 0;
      stepNumber = step;
      recording = record;
      for (Lane &lane : lanes)
        lane.failed = false;
      stepStart = Clock::now();
      ++generation;
    }
    wake.notify_all();
    {
      std::unique_lock<std::mutex> lock(mutex);
      done.wait(lock, [&] { return finished == lanes.size(); });
    }
    StepResult result;
    result.seconds = since(Clock::now());
    // The first failure in plan order is the step's error; the others
    // stopped because of it.
    const Lane *first = nullptr;
    LaneStats stats;
    for (Lane &lane : lanes) {
      stats.merge(lane.stats);
      if (lane.failed && (!first || lane.failedAt < first->failedAt))
        first = &lane;
    }
    if (first)
      return makeError(first->error);
    if (auto err = fill(result, stats))
      return err;
    if (record) {
      result.timings.reserve(starts.size());
      auto &prepared = program.instructions();
      for (unsigned i = 0; i < starts.size(); ++i)
        result.timings.push_back({i, prepared[i].stream, starts[i], ends[i]});
    }
    return result;
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
    }
    wake.notify_all();
    for (Lane &lane : lanes)
      if (lane.thread.joinable())
        lane.thread.join();
  }
};

Executor::Executor(std::unique_ptr<Impl> impl) : impl(std::move(impl)) {}

Executor::~Executor() { impl->stop(); }

llvm::Expected<std::unique_ptr<Executor>>
Executor::create(Program &program, const ExecutorOptions &opts) {
  auto impl = std::make_unique<Impl>(program, opts.serial, opts.seed);
  if (!opts.serial) {
    auto &prepared = program.instructions();
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
      return makeError("cannot start the " +
                       llvm::StringRef(plan::Stream_Name(lane.stream))
                           .drop_front(7)
                           .lower() +
                       " stream's thread: " + e.what());
    }
  }
  return executor;
}

llvm::Expected<StepResult> Executor::run(int64_t step, bool recordTimings) {
  if (impl->serial || impl->lanes.empty())
    return impl->runSerial(step, recordTimings);
  return impl->runConcurrent(step, recordTimings);
}

unsigned Executor::numThreads() const { return impl->lanes.size(); }

llvm::Expected<StepResult> executeStep(Program &program, int64_t step,
                                       bool recordTimings, uint64_t seed) {
  Executor::Impl impl(program, /*serial=*/true, seed);
  return impl.runSerial(step, recordTimings);
}

} // namespace zinc::rt
