//===- ExecutorImpl.h - The executor's state, shared by its files (internal)
//===//
//
// Executor.cpp runs the streams; NvmeLane.cpp runs the NVMe stream's
// pipeline of transfers. Both see the workers' shared state declared here.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_EXECUTORIMPL_H
#define ZINC_RUNTIME_EXECUTORIMPL_H

#include "zinc/runtime/Executor.h"
#include "zinc/support/Error.h"
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

namespace zinc::rt {

using Clock = std::chrono::steady_clock;

namespace detail {

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

} // namespace detail

/// Runs one instruction: its kernel, or its copy between tiers (NVMe copies
/// synchronously).
llvm::Error runInstruction(Program &program, PreparedInstruction &inst,
                           const StepContext &ctx, detail::LaneStats &stats);

/// Sets PreparedInstruction::nvmeWriteBehind on the NVMe writes the NVMe
/// lane may hold back (NvmeWriteBehind.cpp).
void markNvmeWriteBehind(Program &program);

/// --check-numerics: the first non-finite value `inst` wrote, as an error
/// naming the tensor (NumericsCheck.cpp).
llvm::Error checkNumerics(const Program &program,
                          const PreparedInstruction &inst);
/// How many instructions, from the first, --check-numerics checks: all, or
/// with loss scaling those up to the loss.
unsigned lastCheckedInstruction(const Program &program);

/// `err` prefixed with "node 'X' (Op): ".
llvm::Error nodeError(const PreparedInstruction &inst, llvm::Error err);

struct Executor::Impl {
  /// One stream's worker.
  struct Lane {
    plan::Stream stream = plan::STREAM_COMPUTE;
    std::vector<unsigned> instructions; // plan indices, in plan order
    detail::LaneStats stats;
    /// Plan index and message of the instruction that failed, if any.
    bool failed = false;
    unsigned failedAt = 0;
    std::string error;
    std::thread thread;
    /// Wakes this worker when what it waits for may have happened.
    /// (Held by pointer: lanes live in a vector, and a condition variable
    /// does not move.)
    std::unique_ptr<std::condition_variable> ready =
        std::make_unique<std::condition_variable>();
    /// The instruction it is blocked on (under `mutex`), or null.
    const PreparedInstruction *blockedOn = nullptr;
  };

  Program &program;
  bool serial;
  /// A device backend's hooks, or null (the cpu backend).
  ExecutionHooks *hooks = nullptr;
  /// The step and micro-batch being run, and the run's seed
  /// (ExecutorOptions::seed): what every kernel call is told.
  StepContext ctx;
  std::vector<Lane> lanes;
  /// Per plan index, when it started and ended (only while recording).
  std::vector<double> starts, ends;

  std::mutex mutex;
  /// Wakes idle workers: a step starts, or the executor stops. A worker
  /// blocked on an event sleeps on its own Lane::ready instead, woken only
  /// when its wait is satisfied (or the step failed): with one shared
  /// condition variable every signal woke every blocked worker, a
  /// thundering herd of context switches on a machine with few cores.
  std::condition_variable wake;
  /// Wakes the main thread when a worker finishes its step.
  std::condition_variable done;
  uint64_t generation = 0;
  unsigned finished = 0;
  bool stopping = false;
  std::atomic<bool> failed{false};
  std::vector<uint32_t> eventCounts;
  bool recording = false;
  Clock::time_point stepStart;

  /// --check-numerics: instructions below this plan index are checked.
  unsigned checkedBelow = 0;

  Impl(Program &program, bool serial, uint64_t seed)
      : program(program), serial(serial) {
    ctx.seed = seed;
  }

  /// Sets the step and micro-batch the next run is.
  void position(int64_t step, int64_t microBatch, int64_t microBatches) {
    ctx.step = step;
    ctx.microBatch = microBatch;
    ctx.microBatches = std::max<int64_t>(microBatches, 1);
  }

  double since(Clock::time_point t) const {
    return std::chrono::duration<double>(t - stepStart).count();
  }

  bool satisfied(const PreparedInstruction &inst) const {
    for (auto [event, count] : inst.waits)
      if (eventCounts[event] < count)
        return false;
    return true;
  }

  /// Blocks `lane` until `inst`'s waits are satisfied (with a device
  /// backend, until the device work it waits for is ordered before it);
  /// false when the step failed.
  bool waitFor(Lane &lane, const PreparedInstruction &inst) {
    if (!inst.waits.empty()) {
      std::unique_lock<std::mutex> lock(mutex);
      if (!failed.load() && !satisfied(inst)) {
        lane.blockedOn = &inst;
        lane.ready->wait(lock, [&] { return failed.load() || satisfied(inst); });
        lane.blockedOn = nullptr;
      }
    }
    if (failed.load())
      return false;
    if (hooks && !inst.waits.empty())
      if (llvm::Error err = hooks->beforeRun(inst)) {
        fail(lane, indexOf(inst), std::move(err));
        return false;
      }
    return true;
  }

  unsigned indexOf(const PreparedInstruction &inst) const {
    return static_cast<unsigned>(&inst - program.instructions().data());
  }

  /// Whether `inst` does no work in this run: update_only outside the
  /// optimizer step's last micro-batch.
  bool skips(const PreparedInstruction &inst) const {
    return inst.updateOnly && !ctx.lastMicroBatch();
  }

  /// Runs plan instruction `index`: through the device backend's hooks, or
  /// on the host. A skipped one does nothing on the host; a device backend
  /// still orders its signals after its waits (ExecutionHooks::skip).
  llvm::Error execute(PreparedInstruction &inst, unsigned index,
                      detail::LaneStats &stats) {
    if (skips(inst))
      return hooks ? hooks->skip(inst, index) : llvm::Error::success();
    if (hooks)
      return hooks->run(inst, index, ctx, stats.bytes);
    return runInstruction(program, inst, ctx, stats);
  }

  /// Wakes every blocked worker (the step failed).
  void wakeAllBlocked() {
    for (Lane &lane : lanes)
      lane.ready->notify_one();
  }

  /// True when `inst`'s waits are satisfied now; never blocks on them.
  bool readyNow(const PreparedInstruction &inst) {
    if (inst.waits.empty())
      return true;
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (!satisfied(inst))
        return false;
    }
    return !hooks || hooks->deviceReady(inst);
  }

  /// Records that plan instruction `index` started (while recording).
  void started(unsigned index) {
    if (recording)
      starts[index] = since(Clock::now());
  }

  /// Records its end and signals its events.
  void completed(unsigned index) {
    if (recording)
      ends[index] = since(Clock::now());
    const PreparedInstruction &inst = program.instructions()[index];
    if (!inst.signals.empty()) {
      std::lock_guard<std::mutex> lock(mutex);
      for (uint32_t e : inst.signals)
        ++eventCounts[e];
      // Only the workers whose wait is now satisfied; notified under the
      // lock, so none can miss it between its check and its sleep.
      for (Lane &other : lanes)
        if (other.blockedOn && satisfied(*other.blockedOn))
          other.ready->notify_one();
    }
  }

  /// Marks the step failed at plan instruction `index` and wakes everyone.
  void fail(Lane &lane, unsigned index, llvm::Error err) {
    std::string message = llvm::toString(
        nodeError(program.instructions()[index], std::move(err)));
    {
      std::lock_guard<std::mutex> lock(mutex);
      lane.failed = true;
      lane.failedAt = index;
      lane.error = std::move(message);
      failed = true;
      wakeAllBlocked();
    }
  }

  void runLane(Lane &lane) {
    if (lane.stream == plan::STREAM_NVME && program.nvme())
      return runNvmeLane(lane);
    auto &prepared = program.instructions();
    for (unsigned index : lane.instructions) {
      PreparedInstruction &inst = prepared[index];
      if (!waitFor(lane, inst))
        return;
      started(index);
      if (llvm::Error err = execute(inst, index, lane.stats))
        return fail(lane, index, std::move(err));
      completed(index);
    }
  }

  /// The NVMe stream: keeps many transfers in flight and merges those
  /// adjacent in the tier (NvmeLane.cpp).
  void runNvmeLane(Lane &lane);

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
      lane.stats = detail::LaneStats();
      runLane(lane);
      {
        std::lock_guard<std::mutex> lock(mutex);
        ++finished;
      }
      done.notify_one();
    }
  }

  llvm::Expected<StepResult> runSerial(bool record) {
    StepResult result;
    markStepStart();
    detail::LaneStats stats;
    unsigned index = 0;
    for (PreparedInstruction &inst : program.instructions()) {
      double start = record ? since(Clock::now()) : 0;
      if (hooks && !inst.waits.empty())
        if (llvm::Error err = hooks->beforeRun(inst))
          return nodeError(inst, std::move(err));
      if (llvm::Error err = execute(inst, index, stats))
        return nodeError(inst, std::move(err));
      if (hooks)
        if (llvm::Error err = hooks->finishInstruction(inst))
          return nodeError(inst, std::move(err));
      // A skipped instruction wrote nothing this run.
      if (index < checkedBelow && !skips(inst))
        if (llvm::Error err = checkNumerics(program, inst))
          return nodeError(inst, std::move(err));
      if (record)
        result.timings.push_back(
            {index, inst.stream, start, since(Clock::now())});
      ++index;
    }
    if (hooks)
      if (llvm::Error err = hooks->finishStep())
        return err;
    result.seconds = since(Clock::now());
    if (auto err = fill(result, stats))
      return err;
    return result;
  }

  /// The step's counts, and the peaks read from the arenas now that every
  /// stream is through.
  /// The tier's counters when the step started.
  NvmeIoStats nvmeAtStart;

  void markStepStart() {
    stepStart = Clock::now();
    if (program.nvme())
      nvmeAtStart = program.nvme()->ioStats();
  }

  llvm::Error fill(StepResult &result, const detail::LaneStats &stats) {
    result.bytes = stats.bytes;
    if (NvmeStore *nvme = program.nvme()) {
      NvmeIoStats now = nvme->ioStats();
      result.hasNvme = true;
      result.nvmeIo.readBytes = now.readBytes - nvmeAtStart.readBytes;
      result.nvmeIo.writeBytes = now.writeBytes - nvmeAtStart.writeBytes;
      result.nvmeIo.readRequests = now.readRequests - nvmeAtStart.readRequests;
      result.nvmeIo.writeRequests =
          now.writeRequests - nvmeAtStart.writeRequests;
      result.nvmeIo.readBusySeconds =
          now.readBusySeconds - nvmeAtStart.readBusySeconds;
      result.nvmeIo.writeBusySeconds =
          now.writeBusySeconds - nvmeAtStart.writeBusySeconds;
    }
    auto gpu = hooks ? hooks->measuredGpuPeak()
                     : program.gpuArena().touchedBytes();
    if (!gpu)
      return gpu.takeError();
    auto cpu = program.cpuArena().touchedBytes();
    if (!cpu)
      return cpu.takeError();
    result.measuredGpuPeak = *gpu;
    result.measuredCpuPeak = *cpu;
    return llvm::Error::success();
  }

  llvm::Expected<StepResult> runConcurrent(bool record) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      std::fill(eventCounts.begin(), eventCounts.end(), 0);
      failed = false;
      finished = 0;
      recording = record;
      for (Lane &lane : lanes)
        lane.failed = false;
      markStepStart();
      ++generation;
    }
    wake.notify_all();
    {
      std::unique_lock<std::mutex> lock(mutex);
      done.wait(lock, [&] { return finished == lanes.size(); });
    }
    StepResult result;
    // The first failure in plan order is the step's error; the others
    // stopped because of it.
    const Lane *first = nullptr;
    detail::LaneStats stats;
    for (Lane &lane : lanes) {
      stats.merge(lane.stats);
      if (lane.failed && (!first || lane.failedAt < first->failedAt))
        first = &lane;
    }
    if (first)
      return makeError(first->error);
    if (hooks)
      if (llvm::Error err = hooks->finishStep())
        return err;
    result.seconds = since(Clock::now());
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
      wakeAllBlocked();
    }
    wake.notify_all();
    for (Lane &lane : lanes)
      if (lane.thread.joinable())
        lane.thread.join();
  }
};

} // namespace zinc::rt

#endif
