//===- StepLoop.cpp - Feeding inputs, running steps, writing results ------===//
#include "zinc/runtime/StepLoop.h"
#include "zinc/plan/PlanNames.h"
#include "zinc/runtime/Checkpoint.h"
#include "zinc/runtime/EvalProgram.h"
#include "zinc/runtime/Executor.h"
#include "zinc/runtime/GradNorm.h"
#include "zinc/runtime/LrReport.h"
#include "zinc/runtime/Safetensors.h"
#include "zinc/runtime/StepData.h"
#include "zinc/runtime/TokenData.h"
#include "zinc/runtime/comm/Communicator.h"
#include "zinc/support/Error.h"
#include "zinc/support/FiniteJson.h"
#include "zinc/support/Float16.h"
#include "zinc/support/OutputFile.h"
#include "zinc/support/Tier.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <random>

namespace zinc::rt {

namespace {

/// Where each micro-batch's inputs come from (without gradient
/// accumulation a micro-batch is a step).
class InputFeeder {
public:
  /// `microBatches`: how many the plan runs per optimizer step; a data file
  /// or folder must hold at least that many, or a step would see one twice.
  llvm::Error open(Program &program, const RunOptions &opts,
                   unsigned microBatches) {
    seed = opts.seed;
    rank = program.rank();
    ranks = program.ranks();
    if (opts.dataFormat.empty() &&
        (!opts.dataInputs.empty() || !opts.dataOrder.empty()))
      return makeError(llvm::StringRef(!opts.dataInputs.empty()
                                           ? "--data-inputs"
                                           : "--data-order") +
                       " needs --data-format=tokens-u16|tokens-u32");
    if (!opts.dataFormat.empty()) {
      if (opts.dataPath.empty())
        return makeError(
            "--data-format needs --data=FILE, the file of token ids");
      auto feeder = TokenFeeder::open(program, {opts.dataPath, opts.dataFormat,
                                                opts.dataInputs, opts.dataOrder,
                                                opts.seed});
      if (!feeder)
        return feeder.takeError();
      tokens = std::move(*feeder);
      return llvm::Error::success();
    }
    if (opts.dataPath.empty())
      return llvm::Error::success();
    if (llvm::sys::fs::is_directory(opts.dataPath)) {
      auto feeder = ShardFeeder::open(program, opts.dataPath, opts.note);
      if (!feeder)
        return feeder.takeError();
      shards = std::move(*feeder);
      return checkEnough(opts.dataPath, shards->totalSteps(), microBatches,
                         /*folder=*/true);
    }
    auto file = SafetensorsFile::open(opts.dataPath);
    if (!file)
      return file.takeError();
    data = std::move(*file);
    auto steps = checkStepTensors(program, data->tensors(), opts.dataPath);
    if (!steps)
      return steps.takeError();
    dataSteps = static_cast<uint64_t>(*steps);
    return checkEnough(opts.dataPath, dataSteps, microBatches,
                       /*folder=*/false);
  }

  /// Feeds micro-batch `index` of the run (optimizer step i's k-th of N is
  /// i * N + k): the data's slice `index` mod its length.
  llvm::Error feed(Program &program, uint64_t index) {
    if (tokens)
      return tokens->feed(program, index);
    if (shards)
      return shards->feed(program, index);
    if (data) {
      feedStepSlice(program, *data, index % dataSteps);
      return llvm::Error::success();
    }
    for (uint32_t id : program.getPlan().inputs())
      fillSynthetic(program.tensor(id),
                    seed * 1000003 + index * 7919 + id + rank * 104729);
    return llvm::Error::success();
  }

private:
  static llvm::Error checkEnough(llvm::StringRef path, uint64_t held,
                                 unsigned microBatches, bool folder) {
    if (held >= microBatches)
      return llvm::Error::success();
    return makeError(path + (folder ? ": its shards hold " : ": holds ") +
                     llvm::Twine(held) +
                     " micro-batches along the first axis, but the plan runs " +
                     llvm::Twine(microBatches) +
                     " per optimizer step (zinc-compile --grad-accum=" +
                     llvm::Twine(microBatches) +
                     "), and a step needs that many distinct ones");
  }

  /// Floats ~ N(0,1); integers and bools zero, which is a valid index,
  /// class and mask for any model.
  static void fillSynthetic(cpu::TensorRef &ref, uint64_t streamSeed) {
    std::mt19937_64 rng(streamSeed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    int64_t n = ref.numElements();
    switch (ref.dtype) {
    case DType::F32:
      for (int64_t i = 0; i < n; ++i)
        ref.as<float>()[i] = normal(rng);
      break;
    case DType::F64:
      for (int64_t i = 0; i < n; ++i)
        ref.as<double>()[i] = normal(rng);
      break;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i)
        ref.as<uint16_t>()[i] = floatToHalf(normal(rng));
      break;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i)
        ref.as<uint16_t>()[i] = floatToBf16(normal(rng));
      break;
    default:
      std::memset(ref.data, 0, ref.byteSize());
    }
  }

  uint64_t seed = 0;
  unsigned rank = 0, ranks = 1;
  llvm::Optional<SafetensorsFile> data;
  uint64_t dataSteps = 1;
  std::unique_ptr<ShardFeeder> shards;
  std::unique_ptr<TokenFeeder> tokens;
};

} // namespace

static llvm::Optional<double> readScalar(const cpu::TensorRef &t) {
  if (t.numElements() != 1)
    return llvm::None;
  switch (t.dtype) {
  case DType::F32: return *t.as<float>();
  case DType::F64: return *t.as<double>();
  case DType::F16: return halfToFloat(*t.as<uint16_t>());
  case DType::BF16: return bf16ToFloat(*t.as<uint16_t>());
  default: return llvm::None;
  }
}

static void addBytes(TransferBytes &sum, const TransferBytes &b) {
  sum.h2d += b.h2d;
  sum.d2h += b.d2h;
  sum.nvmeRead += b.nvmeRead;
  sum.nvmeWrite += b.nvmeWrite;
}

static void addNvmeIo(NvmeIoStats &sum, const NvmeIoStats &io) {
  sum.readBytes += io.readBytes;
  sum.writeBytes += io.writeBytes;
  sum.readRequests += io.readRequests;
  sum.writeRequests += io.writeRequests;
  sum.readBusySeconds += io.readBusySeconds;
  sum.writeBusySeconds += io.writeBusySeconds;
}

static llvm::json::Value metricsLine(const StepReport &r) {
  // Collectives: what this rank's gathers, reduce-scatters and
  // all-reduces carried (zeros for one rank).
  llvm::json::Object bytes{{"h2d", r.bytes.h2d},
                           {"d2h", r.bytes.d2h},
                           {"nvme_read", r.bytes.nvmeRead},
                           {"nvme_write", r.bytes.nvmeWrite},
                           {"allgather", r.allgatherBytes},
                           {"reduce_scatter", r.reduceScatterBytes},
                           {"allreduce", r.allreduceBytes}};
  llvm::json::Object line{
      {"step", r.step},
      {"seconds", r.seconds},
      {"bytes", std::move(bytes)},
      {"peak_bytes",
       llvm::json::Object{{tierName(MemoryTier::Gpu), r.measuredGpuPeak},
                          {tierName(MemoryTier::Cpu), r.measuredCpuPeak}}}};
  line["loss"] = r.loss ? llvm::json::Value(*r.loss) : llvm::json::Value(nullptr);
  if (r.lr)
    line["lr"] = *r.lr;
  if (r.nvmeIo) {
    // Measured by the tier's I/O thread: busy seconds are those during which
    // a request of that direction was in the kernel, so bytes / busy is the
    // device rate the step got, whatever overlapped it.
    const NvmeIoStats &io = *r.nvmeIo;
    auto rate = [](uint64_t bytes, double seconds) {
      return seconds > 0 ? bytes / seconds : 0.0;
    };
    line["nvme_io"] = llvm::json::Object{
        {"read_bytes", io.readBytes},
        {"write_bytes", io.writeBytes},
        {"read_requests", io.readRequests},
        {"write_requests", io.writeRequests},
        {"read_busy_seconds", io.readBusySeconds},
        {"write_busy_seconds", io.writeBusySeconds},
        {"read_bytes_per_second", rate(io.readBytes, io.readBusySeconds)},
        {"write_bytes_per_second", rate(io.writeBytes, io.writeBusySeconds)}};
  }
  if (r.lossScale) {
    line["loss_scale"] = *r.lossScale;
    line["skipped"] = r.skipped;
  }
  if (r.gradNorm)
    line["grad_norm"] = *r.gradNorm;
  if (r.startup) {
    const StartupReport &s = *r.startup;
    line["startup"] = llvm::json::Object{
        {"seconds_to_first_step", s.totalSeconds},
        {"plan_seconds", s.times.planSeconds},
        {"weights_seconds", s.times.weightsSeconds},
        {"weights", s.times.randomInit ? "random" : "model"},
        {"pin_seconds", s.times.pinSeconds},
        {"device_seconds", s.times.deviceSeconds},
        {"resume_seconds", s.resumeSeconds},
        {"to_device_seconds", s.toDeviceSeconds},
        {"first_step_seconds", s.firstStepSeconds}};
  }
  // A diverged run's NaN loss must not make the file unreadable.
  return finiteJsonObject(std::move(line));
}

static llvm::Error writeOutputs(Program &program, llvm::StringRef path) {
  std::vector<NamedTensor> out;
  for (uint32_t id : program.getPlan().outputs()) {
    const cpu::TensorRef &ref = program.tensor(id);
    out.push_back({program.getPlan().tensors(id).name(), ref.dtype, ref.shape,
                   llvm::ArrayRef<uint8_t>(static_cast<uint8_t *>(ref.data),
                                           ref.byteSize())});
  }
  return writeSafetensors(path, out);
}

/// Track ids of a stream's extra lanes start here (stream ids are below).
static constexpr int kLaneTidBase = 1000;

static llvm::Error writeTrace(Program &program, llvm::StringRef path,
                              llvm::ArrayRef<std::pair<double, StepResult>> steps) {
  llvm::json::Array events;
  // One track per stream of the plan, named and ordered by stream.
  bool present[plan::Stream_ARRAYSIZE] = {};
  for (const plan::Instruction &inst : program.getPlan().instructions())
    present[inst.stream()] = true;
  for (int s = 0; s < plan::Stream_ARRAYSIZE; ++s) {
    if (!present[s])
      continue;
    std::string name = plan::streamName(s);
    events.push_back(
        llvm::json::Object{{"name", "thread_name"},
                           {"ph", "M"},
                           {"pid", 0},
                           {"tid", s},
                           {"args", llvm::json::Object{{"name", name}}}});
    events.push_back(
        llvm::json::Object{{"name", "thread_sort_index"},
                           {"ph", "M"},
                           {"pid", 0},
                           {"tid", s},
                           {"args", llvm::json::Object{{"sort_index", s * kLaneTidBase}}}});
  }
  // A stream that keeps several copies in flight (the nvme lane) has
  // instructions that overlap in time; a trace viewer draws one thread's
  // events as a stack, so each overlapping one goes on a lane of its own,
  // a track named after the stream ("nvme (2)") right below it.
  struct Span {
    int stream;
    double start, end;
    unsigned instruction;
  };
  std::vector<Span> spans;
  for (const auto &[offset, step] : steps)
    for (const InstructionTiming &t : step.timings)
      spans.push_back({t.stream, (offset + t.start) * 1e6, (offset + t.end) * 1e6, t.instruction});
  std::stable_sort(spans.begin(), spans.end(), [](const Span &a, const Span &b) {
    return a.stream != b.stream ? a.stream < b.stream : a.start < b.start;
  });
  std::map<int, std::vector<double>> laneEnds;
  for (const Span &span : spans) {
    std::vector<double> &ends = laneEnds[span.stream];
    size_t lane = 0;
    while (lane < ends.size() && ends[lane] > span.start)
      ++lane;
    if (lane == ends.size()) {
      ends.push_back(0);
      if (lane > 0) {
        int tid = kLaneTidBase + span.stream * kLaneTidBase + static_cast<int>(lane);
        std::string name = plan::streamName(span.stream) + " (" + std::to_string(lane + 1) + ")";
        events.push_back(llvm::json::Object{{"name", "thread_name"},
                                            {"ph", "M"},
                                            {"pid", 0},
                                            {"tid", tid},
                                            {"args", llvm::json::Object{{"name", name}}}});
        events.push_back(llvm::json::Object{
            {"name", "thread_sort_index"},
            {"ph", "M"},
            {"pid", 0},
            {"tid", tid},
            {"args", llvm::json::Object{{"sort_index", span.stream * kLaneTidBase +
                                                           static_cast<int>(lane)}}}});
      }
    }
    ends[lane] = span.end;
    const plan::Instruction &inst = program.getPlan().instructions(span.instruction);
    events.push_back(llvm::json::Object{
        {"name", inst.name()},
        {"cat", inst.op()},
        {"ph", "X"},
        {"ts", span.start},
        {"dur", span.end - span.start},
        {"pid", 0},
        {"tid", lane ? kLaneTidBase + span.stream * kLaneTidBase + static_cast<int>(lane)
                     : span.stream}});
  }
  llvm::json::Value trace(llvm::json::Object{{"traceEvents", std::move(events)},
                                             {"displayTimeUnit", "ms"}});
  return writeOutputFile(path, [&](llvm::raw_ostream &os) {
    os << trace;
    return llvm::Error::success();
  });
}

llvm::Error runSteps(Program &program, const RunOptions &givenOpts,
                     llvm::function_ref<void(const StepReport &)> onStep) {
  RunOptions opts = givenOpts;
  uint64_t firstStep = 0;
  comm::Communicator *comm = program.communicator();
  unsigned ranks = program.ranks();
  // Rank 0 writes the run's files; every rank takes part in gathering
  // what they hold.
  bool reporting = program.rank() == 0;
  using Clock = std::chrono::steady_clock;
  auto secondsSince = [](Clock::time_point from) {
    return std::chrono::duration<double>(Clock::now() - from).count();
  };
  llvm::Optional<StartupReport> startup;
  if (opts.startup) {
    startup.emplace();
    startup->times = *opts.startup;
  }
  // The checkpoint directory is this run's alone while it runs
  // (CheckpointFolder.h); rank 0 writes into it and holds it.
  bool checkpointing = !opts.checkpointDir.empty();
  std::unique_ptr<CheckpointLock> checkpointLock;
  if (checkpointing && reporting) {
    auto lock = CheckpointLock::acquire(opts.checkpointDir);
    if (!lock)
      return lock.takeError();
    checkpointLock = std::move(*lock);
  }
  RunIdentity identity{planChecksum(program), newRunId()};
  if (!opts.resumePath.empty()) {
    auto resumeStart = Clock::now();
    auto resumed = resumeFromCheckpoint(program, opts.resumePath, opts.note);
    if (!resumed)
      return resumed.takeError();
    identity = resumed->identity;
    if (startup)
      startup->resumeSeconds = secondsSince(resumeStart);
    // The checkpoint's values are in host memory now: nothing is left for
    // the device to generate (--init=random).
    program.clearDeviceInit();
    firstStep = resumed->stepsDone;
    // The data position and the Dropout masks follow from the step and
    // the seed: the checkpoint's seed continues its run.
    opts.seed = resumed->seed;
    if (opts.note)
      opts.note(("resuming from " + resumed->path + ": " +
                 llvm::Twine(firstStep) +
                 " steps done, --steps=" + llvm::Twine(opts.steps))
                    .str());
  }
  auto willCheckpoint = [&](uint64_t stepsDone) {
    return stepsDone > firstStep && stepsDone <= opts.steps &&
           ((opts.checkpointEvery && stepsDone % opts.checkpointEvery == 0) ||
            stepsDone == opts.steps);
  };
  if (checkpointing && reporting) {
    if (auto err = checkCheckpointsToWrite(opts.checkpointDir, identity, willCheckpoint))
      return err;
    // A user who meant to continue would otherwise find out much later.
    if (opts.resumePath.empty() && opts.note)
      if (auto other = newestCheckpointOfOtherRuns(opts.checkpointDir, identity))
        opts.note("starting a new run beside the checkpoints of another run in " +
                  opts.checkpointDir + " (the newest: " + *other +
                  "), which it keeps (to continue instead, give --resume)");
  }
  auto stopping = [&] { return opts.stopRequested && opts.stopRequested(); };
  // Gradient accumulation: the plan runs this many times per optimizer
  // step, the update only in the last (Plan.grad_accum).
  const unsigned microBatches = std::max(1u, program.getPlan().grad_accum());
  InputFeeder feeder;
  if (auto err = feeder.open(program, opts, microBatches))
    return err;
  // Read while the state is in host memory, after a resume.
  LrReport lrReport;
  if (auto err = lrReport.open(program, firstStep))
    return err;
  std::unique_ptr<llvm::raw_fd_ostream> metrics;
  if (!opts.metricsPath.empty() && reporting) {
    std::error_code ec;
    metrics = std::make_unique<llvm::raw_fd_ostream>(opts.metricsPath, ec);
    if (ec)
      return makeError(opts.metricsPath + ": cannot write: " + ec.message());
  }
  bool tracing = !opts.tracePath.empty() && reporting;
  std::vector<std::pair<double, StepResult>> traced;
  double elapsed = 0;
  int lossId = program.getPlan().loss();
  const plan::Plan &plan = program.getPlan();
  if (plan.has_loss_scaling()) {
    for (uint32_t id : {plan.loss_scaling().scale(), plan.loss_scaling().found_inf()})
      if (id >= static_cast<uint32_t>(plan.tensors_size()) ||
          program.tensor(id).dtype != DType::F32 || program.tensor(id).numElements() != 1)
        return makeError("corrupt plan: loss scaling names tensor " + llvm::Twine(id) +
                         ", which is not an f32 scalar");
  }
  // Graph inputs, outputs and the numbers reported each step are read and
  // written in host memory between steps.
  auto inHostMemory = [&](uint32_t id, llvm::StringRef what) -> llvm::Error {
    if (id < static_cast<uint32_t>(plan.tensors_size()) &&
        program.place(id).tier == plan::TIER_NVME)
      return makeError("corrupt plan: " + what + " '" +
                       plan.tensors(id).name() + "' is kept in the NVMe tier");
    return llvm::Error::success();
  };
  for (uint32_t id : plan.inputs())
    if (auto err = inHostMemory(id, "graph input"))
      return err;
  for (uint32_t id : plan.outputs())
    if (auto err = inHostMemory(id, "graph output"))
      return err;
  if (lossId >= 0)
    if (auto err = inHostMemory(lossId, "the loss"))
      return err;
  if (plan.has_loss_scaling())
    for (uint32_t id :
         {plan.loss_scaling().scale(), plan.loss_scaling().found_inf()})
      if (auto err = inHostMemory(id, "loss scaling tensor"))
        return err;
  const int64_t gradSumSquares = gradSumSquaresTensor(plan);
  if (gradSumSquares >= plan.tensors_size() ||
      (gradSumSquares >= 0 &&
       (program.tensor(gradSumSquares).dtype != DType::F32 ||
        program.tensor(gradSumSquares).numElements() != 1)))
    return makeError("corrupt plan: gradient clipping's sum of squares is not an f32 "
                     "scalar tensor of the plan");
  if (gradSumSquares >= 0)
    if (auto err = inHostMemory(static_cast<uint32_t>(gradSumSquares),
                                "gradient clipping's sum of squares"))
      return err;
  ExecutorOptions execOpts;
  execOpts.serial = opts.serial;
  execOpts.checkNumerics = opts.checkNumerics;
  execOpts.seed = opts.seed;
  execOpts.hooks = opts.hooks;
  auto executor = Executor::create(program, execOpts);
  if (!executor)
    return executor.takeError();
  // The device starts from the weights loaded (or resumed) in host memory.
  auto toDeviceStart = Clock::now();
  if (opts.hooks)
    if (auto err = opts.hooks->stateToDevice())
      return err;
  if (startup)
    startup->toDeviceSeconds = opts.hooks ? secondsSince(toDeviceStart) : 0;
  auto stateToHost = [&]() -> llvm::Error {
    return opts.hooks ? opts.hooks->stateToHost() : llvm::Error::success();
  };
  // Evaluation: its own feeder and executor over the evaluation program,
  // set up before the first step so that bad eval data stops the run there.
  InputFeeder evalFeeder;
  std::unique_ptr<Executor> evalExecutor;
  int evalLossId = -1;
  if (opts.evalProgram) {
    Program &eval = *opts.evalProgram;
    evalLossId = eval.getPlan().loss();
    if (evalLossId < 0 || evalLossId >= eval.getPlan().tensors_size())
      return makeError(
          "--eval-data: the plan's evaluation program has no loss");
    if (auto err = inHostMemory(static_cast<uint32_t>(evalLossId),
                                "the evaluation loss"))
      return err;
    RunOptions evalData;
    evalData.dataPath = opts.evalDataPath;
    evalData.dataFormat = opts.dataFormat;
    evalData.dataInputs = opts.dataInputs;
    if (!opts.dataFormat.empty())
      evalData.dataOrder = "sequential";
    evalData.seed = opts.seed;
    evalData.note = opts.note;
    if (auto err = evalFeeder.open(eval, evalData, 1))
      return addContext(std::move(err), "--eval-data");
    ExecutorOptions evalExecOpts;
    evalExecOpts.serial = opts.serial;
    evalExecOpts.checkNumerics = opts.checkNumerics;
    evalExecOpts.seed = opts.seed;
    evalExecOpts.hooks = opts.evalHooks;
    auto created = Executor::create(eval, evalExecOpts);
    if (!created)
      return created.takeError();
    evalExecutor = std::move(*created);
  }
  if (opts.evaluate && !opts.evalProgram && program.rank() == 0)
    return makeError("--eval-data: rank 0 has no evaluation program");
  auto evaluate = [&](unsigned step) -> llvm::Error {
    if (auto err = stateToHost())
      return err;
    if (!opts.evalProgram)
      return forEachTrainedWeight(
          program,
          [](llvm::StringRef, llvm::ArrayRef<int64_t>, llvm::ArrayRef<float>) {
            return llvm::Error::success();
          });
    Program &eval = *opts.evalProgram;
    if (auto err = copyTrainedWeights(program, eval))
      return err;
    if (opts.evalHooks)
      if (auto err = opts.evalHooks->stateToDevice())
        return addContext(std::move(err), "evaluation after step " + llvm::Twine(step));
    double sum = 0;
    for (unsigned batch = 0; batch < opts.evalSteps; ++batch) {
      auto where = [&] {
        return "evaluation after step " + llvm::Twine(step) + ", batch " +
               llvm::Twine(batch);
      };
      if (auto err = evalFeeder.feed(eval, batch))
        return addContext(std::move(err), where());
      const plan::Plan &evalPlan = eval.getPlan();
      if (opts.evalHooks)
        if (auto err = opts.evalHooks->inputsToDevice(
                llvm::makeArrayRef(evalPlan.inputs().data(), evalPlan.inputs().size())))
          return addContext(std::move(err), where());
      auto result = evalExecutor->run(step + 1, /*recordTimings=*/false);
      if (!result)
        return addContext(result.takeError(), where());
      llvm::Optional<double> loss = readScalar(eval.tensor(evalLossId));
      if (!loss)
        return makeError("--eval-data: the evaluation program's loss is not a "
                         "float scalar");
      sum += *loss;
    }
    double mean = sum / opts.evalSteps;
    if (metrics) {
      *metrics << llvm::json::Value(
                      llvm::json::Object{{"step", step}, {"eval_loss", mean}})
               << "\n";
      if (auto err = checkOutput(*metrics, opts.metricsPath))
        return err;
    }
    if (opts.onEval)
      opts.onEval(step, mean);
    return llvm::Error::success();
  };
  bool stopped = false;
  for (unsigned step = firstStep; step < opts.steps; ++step) {
    if (stopping()) {
      stopped = true;
      break;
    }
    StepReport report;
    report.step = step;
    report.steps = opts.steps;
    report.reporting = reporting;
    // The collectives' bytes: the device's communicator's where it has one.
    comm::Communicator *counted =
        opts.hooks && opts.hooks->deviceCommunicator() ? opts.hooks->deviceCommunicator() : comm;
    uint64_t gathered = counted ? counted->bytes().allgather.load() : 0;
    uint64_t scattered = counted ? counted->bytes().reduceScatter.load() : 0;
    uint64_t reduced = counted ? counted->bytes().allreduce.load() : 0;
    // The optimizer step's micro-batches: the step's loss is the mean of
    // theirs, its time and traffic their sums; the rest is read after the
    // last, which ran the update. A stop request waits for the step's end:
    // a checkpoint never holds half an accumulated gradient.
    double lossSum = 0;
    bool lossKnown = lossId >= 0;
    for (unsigned micro = 0; micro < microBatches; ++micro) {
      auto where = [&]() -> std::string {
        std::string at = "step " + std::to_string(step);
        return microBatches > 1 ? at + ", micro-batch " + std::to_string(micro)
                                : at;
      };
      if (auto err =
              feeder.feed(program, uint64_t(step) * microBatches + micro))
        return err;
      if (opts.hooks)
        if (auto err = opts.hooks->inputsToDevice(
                llvm::makeArrayRef(plan.inputs().data(), plan.inputs().size())))
          return addContext(std::move(err), where());
      auto result = (*executor)->run(step + 1, tracing, micro, microBatches);
      if (!result)
        return addContext(result.takeError(), where());
      double seconds = result->seconds;
      report.seconds += seconds;
      report.measuredGpuPeak = result->measuredGpuPeak;
      report.measuredCpuPeak = result->measuredCpuPeak;
      addBytes(report.bytes, result->bytes);
      if (result->hasNvme) {
        if (!report.nvmeIo)
          report.nvmeIo.emplace();
        addNvmeIo(*report.nvmeIo, result->nvmeIo);
      }
      if (lossKnown) {
        llvm::Optional<double> loss = readScalar(program.tensor(lossId));
        lossKnown = loss.hasValue();
        lossSum += loss.getValueOr(0);
      }
      // Every micro-batch is traced, one after another on the run's
      // timeline.
      if (tracing)
        traced.push_back({elapsed, std::move(*result)});
      elapsed += seconds;
    }
    if (counted) {
      report.allgatherBytes = counted->bytes().allgather - gathered;
      report.reduceScatterBytes = counted->bytes().reduceScatter - scattered;
      report.allreduceBytes = counted->bytes().allreduce - reduced;
    }
    if (lossKnown)
      report.loss = lossSum / microBatches;
    if (report.loss && comm && ranks > 1) {
      // Each rank's loss is the mean over its share of the batch: their
      // mean is the whole batch's.
      double loss = *report.loss;
      if (auto err = comm->allReduce(&loss, 1, DType::F64, comm::ReduceOp::Mean,
                                     "the loss's all-reduce"))
        return addContext(std::move(err), "step " + llvm::Twine(step));
      report.loss = loss;
    }
    if (startup && step == firstStep) {
      startup->firstStepSeconds = report.seconds;
      startup->totalSeconds = secondsSince(startup->times.began);
      report.startup = startup;
    }
    if (plan.has_loss_scaling()) {
      report.lossScale = readScalar(program.tensor(plan.loss_scaling().scale()));
      report.skipped = *program.tensor(plan.loss_scaling().found_inf()).as<float>() != 0;
    }
    if (gradSumSquares >= 0)
      if (auto sum = readScalar(program.tensor(static_cast<uint32_t>(gradSumSquares))))
        report.gradNorm = std::sqrt(*sum);
    report.lr = lrReport.rate();
    lrReport.stepDone(report.skipped);
    if (metrics) {
      // Flushed and checked every step: a full disk stops the run here,
      // with the steps so far on disk.
      *metrics << metricsLine(report) << "\n";
      if (auto err = checkOutput(*metrics, opts.metricsPath))
        return err;
    }
    onStep(report);
    uint64_t stepsDone = step + 1;
    if (opts.evaluate && !stopping() &&
        ((opts.evalEvery && stepsDone % opts.evalEvery == 0) ||
         stepsDone == opts.steps))
      if (auto err = evaluate(step))
        return err;
    if (checkpointing && willCheckpoint(stepsDone) && !stopping()) {
      if (auto err = stateToHost())
        return err;
      if (auto err = saveCheckpoint(program, opts.checkpointDir, stepsDone,
                                    opts.seed, opts.checkpointKeep, identity,
                                    opts.note, opts.stopRequested, opts.weightKeys)) {
        if (!stopping())
          return err;
        // Abandoned for the stop: nothing of it is left.
        llvm::consumeError(std::move(err));
      }
    }
  }
  if (stopping())
    stopped = true;
  if (metrics)
    if (auto err = closeOutput(*metrics, opts.metricsPath))
      return err;
  // A stopped run has no final outputs or weights: its trace is all that
  // is left to write.
  if (stopped)
    return tracing ? writeTrace(program, opts.tracePath, traced)
                   : llvm::Error::success();
  if (!opts.saveOutputsPath.empty() && reporting)
    if (auto err = writeOutputs(program, opts.saveOutputsPath))
      return err;
  if (!opts.saveWeightsPath.empty()) {
    if (auto err = stateToHost())
      return err;
    if (auto err = writeTrainedWeights(program, opts.saveWeightsPath, opts.weightKeys))
      return err;
  }
  if (tracing)
    return writeTrace(program, opts.tracePath, traced);
  return llvm::Error::success();
}

} // namespace zinc::rt
