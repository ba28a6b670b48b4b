//===- StepLoop.h - Feeding, running and observing steps of a program -----===//
#ifndef ZINC_RUNTIME_STEPLOOP_H
#define ZINC_RUNTIME_STEPLOOP_H

#include "zinc/runtime/Checkpoint.h"
#include "zinc/runtime/Executor.h"
#include "zinc/runtime/Program.h"
#include "llvm/ADT/Optional.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include <chrono>
#include <functional>

namespace zinc::rt {

/// Measured: what start-up took before runSteps (zinc-run's report of its
/// time to first step).
struct StartupTimes {
  /// When the process started: the time to first step counts from here.
  std::chrono::steady_clock::time_point began;
  /// Reading, checking and laying out the plan.
  double planSeconds = 0;
  /// Loading, or with --init=random generating, the initializers.
  double weightsSeconds = 0;
  bool randomInit = false;
  /// Page-locking host memory for DMA (the cuda backend; 0 on the cpu one).
  double pinSeconds = 0;
  /// The rest of the device backend's start (0 on the cpu backend).
  double deviceSeconds = 0;
};

/// StartupTimes completed by the first step of the run.
struct StartupReport {
  StartupTimes times;
  /// Reading the checkpoint (--resume).
  double resumeSeconds = 0;
  /// The state into device memory, with the device's share of
  /// --init=random (0 on the cpu backend).
  double toDeviceSeconds = 0;
  double firstStepSeconds = 0;
  /// From `times.began` to the end of the first step.
  double totalSeconds = 0;
};

struct RunOptions {
  /// Optimizer steps; with gradient accumulation (Plan.grad_accum = N) each
  /// runs the plan N times.
  unsigned steps = 1;
  /// safetensors with one tensor per graph input, first dim = micro-batch
  /// (the step, without gradient accumulation).
  std::string dataPath;
  /// A flat file of token ids instead (TokenData.h): "tokens-u16" or
  /// "tokens-u32", the INPUT,TARGET graph inputs it feeds, and the order of
  /// its windows ("random", the default, or "sequential").
  std::string dataFormat, dataInputs, dataOrder;
  /// Seeds the synthetic inputs and every Dropout mask (with the step and
  /// the node's seed_id).
  uint64_t seed = 0;
  std::string metricsPath;
  std::string saveOutputsPath;
  std::string saveWeightsPath;
  /// The keys of --save-weights and of checkpoints' model.safetensors.
  WeightKeysKind weightKeys = WeightKeysKind::Onnx;
  std::string tracePath;
  /// Run the plan in order on one thread instead of a worker per stream.
  bool serial = false;
  /// Stop at the first non-finite value (ExecutorOptions::checkNumerics).
  bool checkNumerics = false;
  /// Checkpoints (Checkpoint.h): into this directory, after every
  /// `checkpointEvery` steps (0: only after the last), keeping the newest
  /// `checkpointKeep` (0: all).
  std::string checkpointDir;
  unsigned checkpointEvery = 0;
  unsigned checkpointKeep = 0;
  /// Resume from this checkpoint, or the newest one in this directory;
  /// `steps` is then the step count to reach. The checkpoint's seed is used.
  std::string resumePath;
  /// Polled between steps and between a checkpoint's tensors (one rank):
  /// once true (zinc-run's SIGTERM or SIGINT), the step in flight finishes,
  /// a checkpoint being written is abandoned (no partial one is left), the
  /// metrics and trace of the steps done are written, no outputs or weights
  /// are saved, and runSteps returns success.
  std::function<bool()> stopRequested;
  /// Receives one-line notes (resuming, checkpoints removed).
  std::function<void(llvm::StringRef)> note;
  /// A device backend's hooks (zinc-run --backend=cuda), or null: the GPU
  /// tier then lives on the device, and the loop copies inputs in, and
  /// state out before checkpoints and saved weights.
  ExecutionHooks *hooks = nullptr;
  /// Start-up's times so far: the first step's report completes them.
  llvm::Optional<StartupTimes> startup;
  /// Evaluation (zinc-run --eval-data) on every rank: with several, rank 0
  /// alone runs the plan's evaluation program (EvalProgram.h), given as
  /// `evalProgram` there (null on the others, which take part in gathering
  /// the weights it gets). After every `evalEvery` optimizer
  /// steps (0: none but the last) and after the last, it gets the current
  /// weights and runs `evalSteps` batches of `evalDataPath` (read as
  /// `dataPath` is, with `dataFormat` and `dataInputs`; token windows in
  /// sequential order from the start, the same each time, batch j the
  /// data's slice j otherwise); their mean loss goes to `onEval` and to
  /// the metrics as {"step": i, "eval_loss": x}, i the last step done.
  /// With a device backend, `evalHooks` run the evaluation program on the
  /// device (its own arenas there: the two programs' GPU peaks add up); the
  /// weights reach it through its host mirror (stateToDevice).
  bool evaluate = false;
  Program *evalProgram = nullptr;
  ExecutionHooks *evalHooks = nullptr;
  std::string evalDataPath;
  unsigned evalEvery = 0;
  unsigned evalSteps = 1;
  std::function<void(unsigned step, double loss)> onEval;
};

/// What one optimizer step did, for the tool to print. With gradient
/// accumulation: the loss is the mean of the micro-batches', seconds and
/// bytes their sums, the rest as the last micro-batch left it.
struct StepReport {
  unsigned step = 0;
  unsigned steps = 0;
  llvm::Optional<double> loss;
  /// The learning rate of this step's update (plans with an optimizer).
  llvm::Optional<double> lr;
  double seconds = 0;
  /// StepResult's measured peaks (--metrics peak_bytes).
  uint64_t measuredGpuPeak = 0;
  uint64_t measuredCpuPeak = 0;
  /// Bytes each link moved this step.
  TransferBytes bytes;
  /// Bytes this rank's collectives carried this step (Communicator.h).
  uint64_t allgatherBytes = 0, reduceScatterBytes = 0, allreduceBytes = 0;
  /// Whether this process writes the run's files and prints its steps:
  /// rank 0 of several (every rank gets onStep).
  bool reporting = true;
  /// The NVMe tier's measured traffic this step, when the plan has one
  /// (--metrics "nvme_io").
  llvm::Optional<NvmeIoStats> nvmeIo;
  /// With fp16 loss scaling: the scale the next step uses, and whether this
  /// step overflowed and so changed no weight.
  llvm::Optional<double> lossScale;
  /// --clip-grad-norm: the 2-norm of the step's gradients before clipping
  /// (clip_grad_norm_'s return value), unscaled under loss scaling.
  llvm::Optional<double> gradNorm;
  bool skipped = false;
  /// On the run's first step, with RunOptions::startup: the time to it and
  /// its parts (--metrics "startup").
  llvm::Optional<StartupReport> startup;
};

/// Runs `opts.steps` steps: feeds inputs (data slice `i mod len`, or seeded
/// synthetic values), executes, reports each step to `onStep`, and writes
/// the metrics, outputs, weights and trace files asked for. With gradient
/// accumulation over N micro-batches, step i runs the plan N times on the
/// data's micro-batches i*N .. i*N+N-1, and the trace holds every one of
/// them; checkpoints stay at optimizer steps' ends. With several
/// ranks, each takes its 1/N of the batch the data file holds per step,
/// the loss reported is the ranks' mean, and rank 0 writes the files (the
/// weights gathered from every rank's shards).
llvm::Error runSteps(Program &program, const RunOptions &opts,
                     llvm::function_ref<void(const StepReport &)> onStep);

} // namespace zinc::rt

#endif
