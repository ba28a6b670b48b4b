//===- Executor.h - Runs a program's streams for one step -----------------===//
#ifndef ZINC_RUNTIME_EXECUTOR_H
#define ZINC_RUNTIME_EXECUTOR_H

#include "zinc/runtime/ExecutionHooks.h"
#include "zinc/runtime/Program.h"
#include <memory>
#include <vector>

namespace zinc::rt {

/// When one instruction ran, in seconds since the step started.
struct InstructionTiming {
  unsigned instruction = 0;
  int stream = 0;
  double start = 0;
  double end = 0;
};

/// Bytes moved over each link in one step (--metrics "bytes").
struct TransferBytes {
  uint64_t h2d = 0;
  uint64_t d2h = 0;
  uint64_t nvmeRead = 0;
  uint64_t nvmeWrite = 0;
};

struct StepResult {
  double seconds = 0;
  /// Measured after the step: the end of the highest page of the GPU arena
  /// touched so far, at load or in any step (Arena::touchedBytes). Page
  /// resolution; never beyond the plan's proven peak rounded up to a page,
  /// since the arena opens no more.
  uint64_t measuredGpuPeak = 0;
  /// The same in the CPU arena (0 when the plan keeps nothing there).
  uint64_t measuredCpuPeak = 0;
  TransferBytes bytes;
  /// What the NVMe tier measured during the step (bytes and the seconds a
  /// request of each direction was in the kernel); zero without a tier.
  NvmeIoStats nvmeIo;
  bool hasNvme = false;
  /// Filled only when asked for (tracing), in plan order.
  std::vector<InstructionTiming> timings;
};

struct ExecutorOptions {
  /// Run every instruction in plan order on the calling thread instead of a
  /// worker per stream: the reference the concurrent run must match bit for
  /// bit, and easier to debug (zinc-run: ZINC_SERIAL=1).
  bool serial = false;
  /// The run's seed every kernel sees (Dropout's random stream).
  uint64_t seed = 0;
  /// Stop at the first non-finite value a kernel writes, naming the node
  /// and the tensor (zinc-run --check-numerics); runs in plan order.
  bool checkNumerics = false;
  /// A device backend's hooks (ExecutionHooks.h), or null for the cpu
  /// backend; owned by the caller and outliving the executor.
  ExecutionHooks *hooks = nullptr;
};

/// Runs a program's steps: one worker thread per stream of the plan,
/// created once and reused every step, each running its stream's
/// instructions in plan order, waiting on and signalling events; the step
/// ends when every stream is through. A failing instruction stops every
/// stream (waiters are woken) and its error, "node 'X' (Op): ...", is the
/// step's. Nothing is allocated per step except when timings are recorded.
class Executor {
public:
  static llvm::Expected<std::unique_ptr<Executor>>
  create(Program &program, const ExecutorOptions &opts = {});
  ~Executor();
  Executor(const Executor &) = delete;
  Executor &operator=(const Executor &) = delete;

  /// One step; `step` is the 1-based step number the optimizer updates see.
  /// With gradient accumulation, one micro-batch `microBatch` (0-based) of
  /// the optimizer step's `microBatches`: update_only instructions do their
  /// work only in the last and elsewhere just wait and signal. Inputs must
  /// have been fed. Not reentrant.
  llvm::Expected<StepResult> run(int64_t step, bool recordTimings,
                                 int64_t microBatch = 0,
                                 int64_t microBatches = 1);

  /// Worker threads (0 in serial mode).
  unsigned numThreads() const;

  struct Impl;

private:
  explicit Executor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl;
};

/// Runs one instruction on the host, as the cpu backend does (a device
/// backend's host streams: the host optimizer, NVMe transfers), counting
/// the bytes it moves.
llvm::Error runOnHost(Program &program, PreparedInstruction &inst,
                      const StepContext &ctx, TransferBytes &bytes);

/// Runs every instruction once in plan order on the calling thread (the
/// serial reference, no threads); `step` is the 1-based step number, `seed`
/// the run's seed, and `microBatch` of `microBatches` as Executor::run's.
llvm::Expected<StepResult> executeStep(Program &program, int64_t step,
                                       bool recordTimings, uint64_t seed = 0,
                                       int64_t microBatch = 0,
                                       int64_t microBatches = 1);

} // namespace zinc::rt

#endif
