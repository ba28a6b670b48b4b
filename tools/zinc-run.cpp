//===- zinc-run.cpp - Executes a zinc plan for N steps --------------------===//
#include "zinc/runtime/Calibrate.h"
#include "zinc/runtime/EvalProgram.h"
#include "zinc/runtime/Program.h"
#include "zinc/runtime/StepLoop.h"
#include "zinc/runtime/StopSignals.h"
#include "zinc/runtime/comm/Communicator.h"
#include "zinc/runtime/comm/DevicePlacement.h"
#ifdef ZINC_HAVE_CUDA
#include "zinc/runtime/cuda/CudaCalibrate.h"
#include "zinc/runtime/cuda/CudaRuntime.h"
#include "zinc/runtime/cuda/Device.h"
#endif
#include "zinc/support/Error.h"
#include "zinc/support/OutputFile.h"
#include "zinc/support/Size.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"
#include <chrono>
#include <csignal>
#include <cstdio>
#include <unistd.h>

using namespace llvm;

static cl::OptionCategory runCategory("zinc-run options");
static cl::opt<std::string> planPath(cl::Positional, cl::desc("PLAN"), cl::cat(runCategory));
static cl::opt<bool>
    calibrate("calibrate",
              cl::desc("measure this machine (GEMM, memory, copies, CPU Adam, thread "
                       "handoffs, and the NVMe tier under --nvme-dir; with "
                       "--backend=cuda its GPU: GEMMs by precision, HBM, pinned "
                       "copies, launches) and print a hardware description for "
                       "zinc-compile --hw=FILE.json"),
              cl::cat(runCategory));
static cl::opt<unsigned> steps("steps", cl::desc("Steps to run (default 1)"),
                               cl::init(1), cl::cat(runCategory));
static cl::opt<std::string> dataPath(
    "data", cl::desc("safetensors file, one tensor per graph input, first dim = step"),
    cl::value_desc("FILE.safetensors"), cl::cat(runCategory));
static cl::opt<std::string>
    dataFormat("data-format",
               cl::desc("tokens-u16 or tokens-u32: --data is a flat file of "
                        "token ids (nanoGPT's "
                        "train.bin), read in windows"),
               cl::cat(runCategory));
static cl::opt<std::string>
    dataInputs("data-inputs",
               cl::desc("INPUT,TARGET: the graph inputs a token window and the "
                        "window one token on feed"),
               cl::cat(runCategory));
static cl::opt<std::string> dataOrder(
    "data-order",
    cl::desc("Token windows at random offsets (default, seeded by --seed) or "
             "sequential"),
    cl::cat(runCategory));
static cl::opt<std::string> evalData(
    "eval-data",
    cl::desc("Evaluate on this data (the forms of --data; token windows in "
             "sequential order) with the plan's evaluation program: no "
             "update, Dropout off, BatchNorm on its running statistics"),
    cl::value_desc("FILE|DIR"), cl::cat(runCategory));
static cl::opt<int64_t> evalEvery(
    "eval-every",
    cl::desc("Evaluate after every N optimizer steps (and after the last; "
             "default: after the last only)"),
    cl::value_desc("N"), cl::init(0), cl::cat(runCategory));
static cl::opt<int64_t>
    evalSteps("eval-steps",
              cl::desc("Batches of --eval-data per evaluation (default 1)"),
              cl::value_desc("M"), cl::init(1), cl::cat(runCategory));
static cl::opt<std::string> backend("backend", cl::desc("cpu or cuda (default cpu)"),
                                    cl::init("cpu"), cl::cat(runCategory));
static cl::opt<bool> allowTf32(
    "allow-tf32",
    cl::desc("--backend=cuda: let f32 matrix products use TF32 tensor cores "
             "(about 1e-3 relative error per product; default off)"),
    cl::init(false), cl::cat(runCategory));
static cl::opt<std::string>
    modelDir("model-dir",
             cl::desc("Directory the plan's model and its external data are "
                      "read from (default: the directory the model was "
                      "compiled from); nothing outside it is read"),
             cl::value_desc("DIR"), cl::cat(runCategory));
static cl::opt<std::string> nvmeDir("nvme-dir",
                                    cl::desc("Directory for the NVMe tier's files"),
                                    cl::value_desc("DIR"), cl::cat(runCategory));
static cl::opt<std::string> nvmeBlockSize(
    "nvme-block-size", cl::desc("Bytes per NVMe request (default 1MiB)"),
    cl::value_desc("SIZE"), cl::cat(runCategory));
static cl::opt<unsigned> nvmeQueueDepth(
    "nvme-queue-depth", cl::desc("NVMe requests in flight (default 32)"), cl::init(0),
    cl::cat(runCategory));
static cl::opt<std::string> checkpointDir(
    "checkpoint-dir",
    cl::desc(
        "Write checkpoints into DIR/step-<S>/ (after the last step, and every "
        "--checkpoint-every steps)"),
    cl::value_desc("DIR"), cl::cat(runCategory));
static cl::opt<unsigned> checkpointEvery("checkpoint-every",
                                         cl::desc("Steps between checkpoints"),
                                         cl::value_desc("N"), cl::init(0),
                                         cl::cat(runCategory));
static cl::opt<unsigned>
    checkpointKeep("checkpoint-keep",
                   cl::desc("Keep the newest K checkpoints (default: all)"),
                   cl::value_desc("K"), cl::init(0), cl::cat(runCategory));
static cl::opt<std::string> resume(
    "resume",
    cl::desc("Continue from the newest complete checkpoint under DIR (or DIR "
             "itself); --steps is then the step count to reach"),
    cl::value_desc("DIR"), cl::cat(runCategory));
static cl::opt<bool>
    checkNumerics("check-numerics",
                  cl::desc("Stop at the first NaN or infinity a node writes, "
                           "naming the node and the "
                           "tensor (runs the plan in order; with loss scaling, "
                           "the forward pass only)"),
                  cl::cat(runCategory));
static cl::opt<bool> nvmeValidate(
    "nvme-validate", cl::desc("Re-read every NVMe write and compare (slow; for debugging)"),
    cl::cat(runCategory));
static cl::opt<uint64_t> seed("seed",
                              cl::desc("Seed of the synthetic inputs, of "
                                       "Dropout's masks and of --init=random "
                                       "(default 0)"),
                              cl::init(0), cl::cat(runCategory));
static cl::opt<std::string> metricsPath("metrics",
                                        cl::desc("Write one JSON object per step"),
                                        cl::value_desc("FILE.jsonl"), cl::cat(runCategory));
static cl::opt<std::string> saveWeights("save-weights",
                                        cl::desc("Write the fp32 weights at the end"),
                                        cl::value_desc("FILE.safetensors"),
                                        cl::cat(runCategory));
static cl::opt<std::string> weightNames(
    "weight-names",
    cl::desc("Keys of --save-weights and of checkpoints' model.safetensors: "
             "onnx (default: ONNX initializer names) or pytorch (the PyTorch "
             "state_dict keys of initializers the exporter renamed, such as a "
             "folded transpose 'onnx::MatMul_12', in PyTorch's layout)"),
    cl::value_desc("onnx|pytorch"), cl::init("onnx"), cl::cat(runCategory));
static cl::opt<std::string> saveOutputs("save-outputs",
                                        cl::desc("Write the graph outputs of the last step"),
                                        cl::value_desc("FILE.safetensors"),
                                        cl::cat(runCategory));
static cl::opt<std::string> tracePath("trace",
                                      cl::desc("Write the measured timeline (Chrome trace JSON)"),
                                      cl::value_desc("FILE.json"), cl::cat(runCategory));

static cl::opt<std::string> initFrom(
    "init",
    cl::desc("Where trained parameters come from: model (default: the model's "
             "initializers) or random (the generator seeded by --seed: matrices "
             "normal(0, 0.02), biases 0, norm scales 1, no weights file read; for "
             "benchmarks and from-scratch runs; --resume restores the checkpoint "
             "instead)"),
    cl::value_desc("model|random"), cl::init("model"), cl::cat(runCategory));

static cl::opt<double> collectiveTimeout(
    "collective-timeout",
    cl::desc("Seconds a collective may wait for the other ranks before this rank "
             "stops with a diagnostic (default 300)"),
    cl::init(300), cl::cat(runCategory));

static cl::opt<std::string> commChoice(
    "comm",
    cl::desc("--backend=cuda with several ranks: how their collectives travel: "
             "nccl (a GPU per rank), mpi (staged through pinned host memory; "
             "ranks may share a GPU) or auto (default: nccl when every rank has "
             "a GPU of its own)"),
    cl::value_desc("auto|nccl|mpi"), cl::init("auto"), cl::cat(runCategory));

static constexpr StringLiteral tool = "zinc-run";

/// This rank's number, for the signal handler's message.
static volatile sig_atomic_t signalRank = -1;

/// mpirun and srun stop the other ranks with SIGTERM when one dies: say so
/// (async-signal-safe), instead of vanishing without a word.
static void onTerminate(int) {
  char msg[160];
  int rank = signalRank;
  int n = snprintf(msg, sizeof msg,
                   "zinc-run: error: rank %d: stopped by the launcher (SIGTERM); "
                   "another rank probably failed\n",
                   rank);
  if (n > 0)
    (void)!::write(2, msg, static_cast<size_t>(n));
  _exit(1);
}

/// One line, redrawn in place, when stderr is a terminal.
static void drawProgress(const zinc::rt::StepReport &r, double elapsed) {
  unsigned done = r.step + 1;
  constexpr unsigned width = 24;
  unsigned filled = r.steps ? width * done / r.steps : width;
  double rate = elapsed > 0 ? done / elapsed : 0;
  double eta = rate > 0 ? (r.steps - done) / rate : 0;
  errs() << "\r[" << std::string(filled, '#') << std::string(width - filled, ' ')
         << "] " << done << "/" << r.steps << "  " << format("%.2f", rate)
         << " steps/s";
  if (r.loss)
    errs() << "  loss " << format("%.6f", *r.loss);
  errs() << "  ETA " << format("%.1f", eta) << "s   ";
  if (done == r.steps)
    errs() << "\n";
}

/// When the process started: zinc-run's time to first step counts from here.
static const auto processStart = std::chrono::steady_clock::now();

static int toolMain(int argc, char **argv) {
  InitLLVM init(argc, argv);
  zinc::reportFileSizeLimitAsWriteErrors();
  cl::HideUnrelatedOptions(runCategory);
  cl::ParseCommandLineOptions(argc, argv, "zinc-run: execute a zinc plan\n");

  if (backend != "cpu" && backend != "cuda") {
    zinc::printError(tool, zinc::makeError("unknown backend '" + backend +
                                           "' (expected cpu or cuda)"));
    return 1;
  }
  auto commKind = zinc::comm::parseCommKind(commChoice);
  if (!commKind) {
    zinc::printError(tool, commKind.takeError());
    return 1;
  }
  if (*commKind == zinc::comm::CommKind::Nccl && backend != "cuda") {
    zinc::printError(tool, zinc::makeError("--comm=nccl needs --backend=cuda (the cpu "
                                           "backend's ranks exchange over MPI)"));
    return 1;
  }
#ifndef ZINC_HAVE_CUDA
  // NCCL comes with the cuda backend: a build without one has neither.
  if (*commKind == zinc::comm::CommKind::Nccl) {
    zinc::printError(tool, zinc::makeError("--comm=nccl: this zinc-run was built without "
                                           "NCCL (and without the cuda backend); use "
                                           "--backend=cpu, whose ranks exchange over MPI"));
    return 1;
  }
  if (backend == "cuda") {
    zinc::printError(tool, zinc::makeError(
                               "--backend=cuda: this zinc-run was built without "
                               "the cuda backend (no nvcc at build time); use "
                               "--backend=cpu"));
    return 1;
  }
#endif
  if (evalData.empty() &&
      (evalEvery.getNumOccurrences() || evalSteps.getNumOccurrences())) {
    zinc::printError(tool, zinc::makeError("--eval-every and --eval-steps need "
                                           "--eval-data"));
    return 1;
  }
  for (const cl::opt<int64_t> *count : {&evalEvery, &evalSteps})
    if (count->getNumOccurrences() && (*count < 1 || *count > UINT32_MAX)) {
      zinc::printError(tool, zinc::makeError("--" + count->ArgStr +
                                             " must be between 1 and " +
                                             Twine(UINT32_MAX) + ", not " +
                                             Twine(int64_t(*count))));
      return 1;
    }
#ifdef ZINC_HAVE_CUDA
  // Said before a long load: the device is the first thing a cuda run needs.
  if (backend == "cuda") {
    auto devices = zinc::cuda::cudaDeviceCount();
    if (!devices || *devices == 0) {
      zinc::printError(tool, devices ? zinc::makeError(calibrate
                                                           ? "--calibrate --backend=cuda needs a "
                                                             "CUDA device, and this machine has "
                                                             "none (--calibrate alone measures "
                                                             "the cpu backend)"
                                                           : "--backend=cuda needs a CUDA device, "
                                                             "and this machine has none (use "
                                                             "--backend=cpu)")
                                     : zinc::addContext(devices.takeError(), "--backend=cuda"));
      return 1;
    }
  }
#endif
  if (initFrom != "model" && initFrom != "random") {
    zinc::printError(tool, zinc::makeError("--init: unknown value '" + initFrom +
                                           "' (expected model or random)"));
    return 1;
  }
  if (allowTf32 && backend != "cuda") {
    zinc::printError(tool, zinc::makeError("--allow-tf32 applies to --backend=cuda"));
    return 1;
  }
  if (!nvmeDir.empty() && !sys::fs::is_directory(nvmeDir)) {
    zinc::printError(tool, zinc::makeError(nvmeDir + ": --nvme-dir is not a directory"));
    return 1;
  }
  if (calibrate) {
    if (!planPath.empty()) {
      zinc::printError(tool, zinc::makeError("--calibrate measures the machine and takes "
                                             "no PLAN"));
      return 1;
    }
    zinc::rt::CalibrateOptions calibration;
    calibration.nvmeDir = nvmeDir;
    calibration.progress = [](const std::string &line) {
      errs() << tool << ": calibrate: " << line << "\n";
    };
#ifdef ZINC_HAVE_CUDA
    if (backend == "cuda") {
      auto json = zinc::cuda::calibrateCudaMachine(calibration);
      if (!json) {
        zinc::printError(tool, json.takeError());
        return 1;
      }
      outs() << *json << "\n";
      return 0;
    }
#endif
    auto hw = zinc::rt::calibrateThisMachine(calibration);
    if (!hw) {
      zinc::printError(tool, hw.takeError());
      return 1;
    }
    outs() << zinc::hardwareToJson(*hw) << "\n";
    return 0;
  }
  if (planPath.empty()) {
    zinc::printError(tool, zinc::makeError("no PLAN given (usage: zinc-run PLAN [options], "
                                           "or zinc-run --calibrate)"));
    return 1;
  }
  if (steps == 0) {
    zinc::printError(tool, zinc::makeError("--steps must be at least 1"));
    return 1;
  }

  // Several ranks: started by mpirun (or srun), they talk over MPI.
  std::unique_ptr<zinc::comm::Communicator> comm;
  if (zinc::comm::launchedAsMpiRank()) {
    if (collectiveTimeout <= 0) {
      zinc::printError(tool, zinc::makeError("--collective-timeout must be positive"));
      return 1;
    }
    auto mpi = zinc::comm::createMpiCommunicator(collectiveTimeout);
    if (!mpi) {
      zinc::printError(tool, mpi.takeError());
      return 1;
    }
    comm = std::move(*mpi);
    signalRank = static_cast<int>(comm->rank());
    std::signal(SIGTERM, onTerminate);
  }
  zinc::rt::LoadOptions loadOpts;
  loadOpts.nvmeDir = nvmeDir;
  loadOpts.modelDir = modelDir;
  loadOpts.comm = comm.get();
  if (!nvmeBlockSize.empty()) {
    auto size = zinc::parseSize(nvmeBlockSize);
    if (!size) {
      zinc::printError(tool, zinc::addContext(size.takeError(), "--nvme-block-size"));
      return 1;
    }
    if (*size == 0 || *size % 4096) {
      zinc::printError(tool, zinc::makeError("--nvme-block-size must be a positive "
                                             "multiple of 4096 (O_DIRECT sectors)"));
      return 1;
    }
    loadOpts.nvmeIo.blockBytes = *size;
  }
  loadOpts.nvmeIo.queueDepth = nvmeQueueDepth;
  loadOpts.nvmeIo.validate = nvmeValidate;
  loadOpts.warn = [](StringRef msg) { zinc::printWarning(tool, msg); };
  loadOpts.randomInit = initFrom == "random";
  loadOpts.initSeed = seed;
  // The cuda backend makes GPU-tier parameters in device memory.
  loadOpts.deviceGeneratesGpuTier = backend == "cuda";
  loadOpts.gpuTierInHostMemory = backend != "cuda";
  auto loadStart = std::chrono::steady_clock::now();
  auto program = zinc::rt::Program::load(planPath, loadOpts);
  if (!program) {
    zinc::printError(tool, program.takeError());
    return 1;
  }
  auto secondsSince = [](std::chrono::steady_clock::time_point from) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - from)
        .count();
  };
  // With several ranks, rank 0 evaluates alone; the others take part in
  // gathering the weights it needs.
  std::unique_ptr<zinc::rt::Program> evalProgram;
  if (!evalData.empty() && (!comm || comm->rank() == 0)) {
    zinc::rt::LoadOptions evalOpts = loadOpts;
    evalOpts.comm = nullptr;
    auto loaded = zinc::rt::loadEvalProgram(**program, evalOpts);
    if (!loaded) {
      zinc::printError(tool, loaded.takeError());
      return 1;
    }
    evalProgram = std::move(*loaded);
  }
  zinc::rt::StartupTimes startup;
  startup.began = processStart;
  startup.weightsSeconds = (*program)->weightsSeconds();
  startup.planSeconds = secondsSince(loadStart) - startup.weightsSeconds;
  startup.randomInit = loadOpts.randomInit;
  zinc::rt::RunOptions opts;
#ifdef ZINC_HAVE_CUDA
  std::unique_ptr<zinc::rt::ExecutionHooks> device, evalDevice;
  if (backend == "cuda") {
    zinc::cuda::CudaRuntimeOptions cudaOpts;
    cudaOpts.allowTf32 = allowTf32;
    cudaOpts.comm = *commKind;
    cudaOpts.collectiveTimeout = collectiveTimeout;
    auto deviceStart = std::chrono::steady_clock::now();
    auto runtime = zinc::cuda::createCudaRuntime(**program, cudaOpts);
    if (!runtime) {
      zinc::printError(tool, runtime.takeError());
      return 1;
    }
    device = std::move(*runtime);
    opts.hooks = device.get();
    // The evaluation program on the training's device, beside it.
    if (evalProgram) {
      zinc::cuda::CudaRuntimeOptions evalCuda = cudaOpts;
      evalCuda.device = device->deviceOrdinal();
      auto evalRuntime = zinc::cuda::createCudaRuntime(*evalProgram, evalCuda);
      if (!evalRuntime) {
        zinc::printError(tool, zinc::addContext(evalRuntime.takeError(),
                                                "--eval-data: the evaluation program"));
        return 1;
      }
      evalDevice = std::move(*evalRuntime);
      opts.evalHooks = evalDevice.get();
    }
    startup.pinSeconds = device->pinSeconds();
    startup.deviceSeconds = secondsSince(deviceStart) - startup.pinSeconds;
    if (zinc::comm::Communicator *collectives = device->deviceCommunicator())
      if (collectives->rank() == 0)
        zinc::printNote(tool, Twine(collectives->size()) + " ranks: collectives over " +
                                  collectives->kind() + " (--comm=" + commChoice + ")");
  }
#endif
  opts.startup = startup;
  opts.steps = steps;
  opts.dataPath = dataPath;
  opts.dataFormat = dataFormat;
  opts.dataInputs = dataInputs;
  opts.dataOrder = dataOrder;
  opts.seed = seed;
  opts.evaluate = !evalData.empty();
  opts.evalProgram = evalProgram.get();
  opts.evalDataPath = evalData;
  opts.evalEvery = static_cast<unsigned>(evalEvery);
  opts.evalSteps = static_cast<unsigned>(evalSteps);
  opts.onEval = [](unsigned step, double loss) {
    outs() << "step " << step << ": eval loss " << format("%.6f", loss) << "\n";
    outs().flush();
  };
  opts.metricsPath = metricsPath;
  opts.saveOutputsPath = saveOutputs;
  opts.saveWeightsPath = saveWeights;
  if (weightNames == "pytorch") {
    opts.weightKeys = zinc::rt::WeightKeysKind::Pytorch;
  } else if (weightNames != "onnx") {
    zinc::printError(tool,
                     zinc::makeError("--weight-names must be onnx or pytorch, "
                                     "not '" + weightNames + "'"));
    return 1;
  }
  opts.tracePath = tracePath;
  opts.checkNumerics = checkNumerics;
  if ((checkpointEvery.getNumOccurrences() ||
       checkpointKeep.getNumOccurrences()) &&
      checkpointDir.empty()) {
    zinc::printError(
        tool, zinc::makeError("--checkpoint-every and --checkpoint-keep need "
                              "--checkpoint-dir=DIR"));
    return 1;
  }
  if (checkpointEvery.getNumOccurrences() && checkpointEvery == 0) {
    zinc::printError(tool,
                     zinc::makeError("--checkpoint-every must be at least 1"));
    return 1;
  }
  opts.checkpointDir = checkpointDir;
  opts.checkpointEvery = checkpointEvery;
  opts.checkpointKeep = checkpointKeep;
  opts.resumePath = resume;
  // Notes are the run's, said once: by rank 0 when there are several.
  bool noting = !comm || comm->rank() == 0;
  opts.note = [noting](StringRef msg) {
    if (noting)
      zinc::printNote(tool, msg);
  };
  // ZINC_SERIAL=1: every instruction in plan order on one thread, the
  // reference the per-stream workers must match (debugging).
  if (Optional<std::string> serial = sys::Process::GetEnv("ZINC_SERIAL"))
    opts.serial = !serial->empty() && *serial != "0";

  bool terminal = sys::Process::StandardErrIsDisplayed() && (!comm || comm->rank() == 0);
  auto start = std::chrono::steady_clock::now();
  unsigned stepsDone = 0;
  auto onStep = [&](const zinc::rt::StepReport &r) {
    stepsDone = r.step + 1;
    if (!r.reporting)
      return;
    if (r.startup) {
      const zinc::rt::StartupReport &s = *r.startup;
      std::string line;
      raw_string_ostream os(line);
      os << "time to first step " << format("%.3f", s.totalSeconds) << " s: plan "
         << format("%.3f", s.times.planSeconds) << " s, weights "
         << format("%.3f", s.times.weightsSeconds) << " s ("
         << (s.times.randomInit ? "random" : "model") << "), pinning "
         << format("%.3f", s.times.pinSeconds) << " s, device start "
         << format("%.3f", s.times.deviceSeconds) << " s, resume "
         << format("%.3f", s.resumeSeconds) << " s, to device "
         << format("%.3f", s.toDeviceSeconds) << " s, first step "
         << format("%.3f", s.firstStepSeconds) << " s";
      zinc::printNote(tool, os.str());
    }
    outs() << "step " << r.step;
    if (r.loss)
      outs() << ": loss " << format("%.6f", *r.loss);
    outs() << " (" << format("%.3f", r.seconds * 1e3) << " ms)";
    if (r.skipped && r.lossScale)
      outs() << " (skipped: overflow, loss scale -> " << format("%g", *r.lossScale) << ")";
    outs() << "\n";
    outs().flush();
    if (terminal)
      drawProgress(r, std::chrono::duration<double>(
                          std::chrono::steady_clock::now() - start)
                          .count());
  };
  // One process: SIGTERM and SIGINT stop the run cleanly (StopSignals.h).
  // Several ranks keep the launcher's handler above: they cannot stop at
  // one step together.
  if (!comm) {
    zinc::rt::installStopSignals();
    opts.stopRequested = [] { return zinc::rt::stopSignal() != 0; };
  }
  if (auto err = zinc::rt::runSteps(**program, opts, onStep)) {
    zinc::printError(tool, std::move(err));
    return 1;
  }
  if (int signal = zinc::rt::stopSignal()) {
    if (terminal)
      errs() << "\n";
    zinc::printNote(tool, Twine("stopped by ") + (signal == SIGINT ? "SIGINT" : "SIGTERM") +
                              " with " + Twine(stepsDone) + " of " + Twine(steps) +
                              " steps done; their metrics and trace are written, no "
                              "partial checkpoint is left");
    return 128 + signal;
  }
  return 0;
}

int main(int argc, char **argv) {
  int status = toolMain(argc, argv);
  // A rank that failed stops the others (which may be waiting on it in a
  // collective); one that succeeded leaves MPI cleanly.
  zinc::comm::finishMpi(/*failed=*/status != 0);
  // What the tool printed must have reached its standard output.
  return zinc::finishStandardOutput("zinc-run", status);
}
