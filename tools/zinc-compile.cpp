//===- zinc-compile.cpp - ONNX model to zinc plan -------------------------===//
#include "zinc/frontend/OnnxImporter.h"
#include "zinc/passes/CompileReport.h"
#include "zinc/passes/EmitPlan.h"
#include "zinc/passes/LossOutput.h"
#include "zinc/passes/PassManager.h"
#include "zinc/passes/PassManagerOptions.h"
#include "zinc/planning/CompileDriver.h"
#include "zinc/plan/PlanSimulator.h"
#include "zinc/plan/PlanTimeline.h"
#include "zinc/plan/PlanVerifier.h"
#include "zinc/support/Error.h"
#include "zinc/support/Hardware.h"
#include "zinc/support/OutputFile.h"
#include "zinc/support/Size.h"
#include "llvm/Support/BuryPointer.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Timer.h"
#include "llvm/Support/raw_ostream.h"
#include <cmath>
#include <future>
#ifdef __GLIBC__
#include <malloc.h>
#endif

using namespace llvm;

static cl::OptionCategory compileCategory("zinc-compile options");
static cl::opt<std::string> modelPath(cl::Positional, cl::desc("MODEL"),
                                      cl::cat(compileCategory));
static cl::opt<std::string> outputPath("o", cl::desc("Output plan"),
                                       cl::value_desc("PLAN"), cl::cat(compileCategory));
static cl::opt<bool> printPipeline("print-pipeline",
                                   cl::desc("Print the pass pipeline and exit"),
                                   cl::cat(compileCategory));
static cl::opt<std::string> mode("mode", cl::desc("train (default) or infer"),
                                 cl::init("train"), cl::cat(compileCategory));
static cl::opt<std::string> lossName("loss",
                                     cl::desc("Graph output holding the scalar loss"),
                                     cl::cat(compileCategory));
static cl::opt<std::string> freeze("freeze",
                                   cl::desc("Initializers matching this regex are not trained"),
                                   cl::value_desc("REGEX"), cl::cat(compileCategory));
static cl::opt<std::string> optimizer("optimizer", cl::desc("adamw (default), adam, sgd, or none (gradients become outputs)"),
                                      cl::init("adamw"), cl::cat(compileCategory));
static cl::opt<double> lr("lr", cl::desc("Learning rate (default 1e-3)"), cl::init(1e-3),
                          cl::cat(compileCategory));
static cl::opt<double> beta1("beta1", cl::desc("Adam beta1 (default 0.9)"), cl::init(0.9),
                             cl::cat(compileCategory));
static cl::opt<double> beta2("beta2", cl::desc("Adam beta2 (default 0.999)"),
                             cl::init(0.999), cl::cat(compileCategory));
static cl::opt<double> eps("eps", cl::desc("Adam epsilon (default 1e-8)"), cl::init(1e-8),
                           cl::cat(compileCategory));
static cl::opt<double> weightDecay(
    "weight-decay", cl::desc("Weight decay (default 0.01 for adamw, 0 otherwise)"),
    cl::init(-1), cl::cat(compileCategory));
static cl::opt<double> momentum("momentum", cl::desc("SGD momentum (default 0)"),
                                cl::init(0), cl::cat(compileCategory));
static cl::opt<bool> nesterov("nesterov", cl::desc("SGD with Nesterov momentum"),
                              cl::cat(compileCategory));
static cl::opt<std::string>
    lrSchedule("lr-schedule",
               cl::desc("constant (default), linear or cosine: transformers' "
                        "schedules with warmup"),
               cl::init("constant"), cl::cat(compileCategory));
static cl::opt<int64_t>
    warmupSteps("warmup-steps",
                cl::desc("Updates of linear warmup from 0 (default 0)"),
                cl::init(0), cl::cat(compileCategory));
static cl::opt<int64_t>
    totalSteps("total-steps",
               cl::desc("Updates at which linear and cosine decay end"),
               cl::init(0), cl::cat(compileCategory));
static cl::opt<double> clipGradNorm(
    "clip-grad-norm",
    cl::desc("Scale the gradients to this 2-norm when above it, as "
             "torch.nn.utils.clip_grad_norm_ (default: no clipping)"),
    cl::init(0), cl::cat(compileCategory));
static cl::opt<int64_t> gradAccum(
    "grad-accum",
    cl::desc("Micro-batches per optimizer step: their gradients are summed, each "
             "micro-batch's loss gradient divided by N, then one update (default 1)"),
    cl::init(1), cl::cat(compileCategory));
static cl::opt<std::string> gradReduce(
    "grad-reduce",
    cl::desc("With --grad-accum under ZeRO stages 2-3: reduce-scatter the gradients "
             "every micro-batch (micro-batch) or once per step from whole f32 sums on "
             "each rank (step); auto (the default) plans both and keeps the one the "
             "cost model predicts faster"),
    cl::init("auto"), cl::cat(compileCategory));
static cl::opt<std::string> precision("precision", cl::desc("fp32 (default), bf16 or fp16"),
                                      cl::init("fp32"), cl::cat(compileCategory));
static cl::opt<std::string> lossScale(
    "loss-scale", cl::desc("dynamic (default with fp16: GradScaler's scheme), N (a fixed "
                           "scale) or none"),
    cl::cat(compileCategory));
static cl::opt<double> initialLossScale("initial-loss-scale",
                                        cl::desc("Scale of the first step (default 65536)"),
                                        cl::init(65536.0), cl::cat(compileCategory));
static cl::opt<int64_t> lossScaleGrowthInterval(
    "loss-scale-growth-interval",
    cl::desc("Good steps before the dynamic scale doubles (default 2000)"), cl::init(2000),
    cl::cat(compileCategory));
static cl::opt<std::string> offloadOptimizer(
    "offload-optimizer", cl::desc("Home of optimizer states: auto (default), none, cpu or nvme"),
    cl::init("auto"), cl::cat(compileCategory));
static cl::opt<std::string> offloadParams(
    "offload-params", cl::desc("Home of parameters: auto (default), none, cpu or nvme"),
    cl::init("auto"), cl::cat(compileCategory));
static cl::opt<unsigned> prefetchDistance(
    "prefetch-distance",
    cl::desc("Issue each prefetch N compute nodes ahead of its use (default: timed by the "
             "cost model, the lead with the fastest predicted step that fits)"),
    cl::init(2), cl::cat(compileCategory));
static cl::opt<std::string> bucketBytes(
    "bucket-bytes",
    cl::desc("Merge ZeRO collectives of one kind into buckets of up to SIZE bytes, each "
             "issued as one group (default: chosen by the cost model; 0: one tensor each)"),
    cl::value_desc("SIZE"), cl::cat(compileCategory));
static cl::opt<bool> fuseAttention(
    "fuse-attention",
    cl::desc("Make each attention of Q Kt, scale, mask, softmax, dropout and V one fused op "
             "whose memory is linear in the sequence length (default true)"),
    cl::init(true), cl::cat(compileCategory));
static cl::opt<bool> reorderCompute(
    "reorder-compute",
    cl::desc("With timed prefetches, move compute that does not depend on a late transfer "
             "into the predicted wait for it (default true)"),
    cl::init(true), cl::cat(compileCategory));
static cl::opt<bool> delayUpdates(
    "dpu",
    cl::desc("Delayed parameter update: the host's optimizer update of a step overlaps the "
             "next step's forward and backward, applying gradients one step late (default off)"),
    cl::init(false), cl::cat(compileCategory));
static cl::opt<std::string> delayedUpdates(
    "dpu-updates",
    cl::desc("With --dpu, where the host's updates run: auto (default: the faster predicted "
             "step), start (all at the start of the step) or spread (over its compute)"),
    cl::init("auto"), cl::cat(compileCategory));
static cl::opt<std::string> tile(
    "tile", cl::desc("Memory-centric tiling: auto (default: per operator, when it does not "
                     "fit), none, or N tiles for every large tileable operator"),
    cl::init("auto"), cl::cat(compileCategory));
static cl::opt<std::string> activationCheckpointing(
    "activation-checkpointing",
    cl::desc("auto (default: recompute forward segments in backward when the activations "
             "kept for it do not fit), none, or every-layer"),
    cl::init("auto"), cl::cat(compileCategory));
static cl::opt<unsigned> ranks("ranks",
                              cl::desc("Data-parallel ranks (default 1); run the plan with "
                                       "mpirun -np N zinc-run"),
                              cl::init(1), cl::cat(compileCategory));
static cl::opt<unsigned> zeroStage(
    "zero-stage",
    cl::desc("ZeRO partitioning across ranks: 0 (default) none, 1 optimizer states and "
             "master weights, 2 + gradients, 3 + parameters"),
    cl::init(0), cl::cat(compileCategory));
static cl::list<std::string> dims("dim", cl::desc("Bind a symbolic dimension"),
                                  cl::value_desc("NAME=VALUE"), cl::cat(compileCategory));
static cl::opt<std::string> hwName("hw", cl::desc("Hardware preset or FILE.json"),
                                   cl::init("cpu"), cl::cat(compileCategory));
static cl::opt<std::string> gpuMem("gpu-mem", cl::desc("GPU tier capacity"),
                                   cl::value_desc("SIZE"), cl::cat(compileCategory));
static cl::opt<std::string> cpuMem("cpu-mem", cl::desc("CPU tier capacity"),
                                   cl::value_desc("SIZE"), cl::cat(compileCategory));
static cl::opt<std::string> nvmeMem("nvme-mem", cl::desc("NVMe tier capacity"),
                                    cl::value_desc("SIZE"), cl::cat(compileCategory));
static cl::opt<std::string> reportPath("report", cl::desc("Write the compile report"),
                                       cl::value_desc("FILE.json"), cl::cat(compileCategory));
// Off by default, as in LLVM's opt: the plan verifier checks every plan
// written; tests of passes run zinc-opt, which verifies after each pass.
static cl::opt<bool> verifyEach("verify-each",
                                cl::desc("Run the IR verifier after every pass (default off)"),
                                cl::init(false), cl::cat(compileCategory));
static cl::opt<std::string> emit("emit", cl::desc("binary (default) or text"),
                                 cl::init("binary"), cl::cat(compileCategory));

static constexpr StringLiteral tool = "zinc-compile";

static Expected<uint64_t> capacity(const std::string &flag, const std::string &value,
                                   uint64_t preset) {
  if (value.empty())
    return preset;
  auto size = zinc::parseSize(value);
  if (!size)
    return zinc::addContext(size.takeError(), "--" + flag);
  return *size;
}

/// --tile=auto|none|N into the memory options.
static Error parseTile(StringRef value, zinc::MemoryOptions &memory) {
  if (value == "auto") {
    memory.tileMode = zinc::TileMode::Auto;
    return Error::success();
  }
  if (value == "none") {
    memory.tileMode = zinc::TileMode::None;
    return Error::success();
  }
  unsigned n = 0;
  if (value.getAsInteger(10, n) || n == 0)
    return zinc::makeError("--tile must be auto, none or a positive tile count, not '" +
                           value + "'");
  memory.tileMode = n == 1 ? zinc::TileMode::None : zinc::TileMode::Fixed;
  memory.tileCount = n;
  return Error::success();
}

/// --lr-schedule, --warmup-steps and --total-steps, refusing a step count
/// that would be ignored or is missing rather than guessing (transformers'
/// Trainer decays linearly by default, zinc's rate is constant).
static Expected<zinc::LrSchedule> parseLrSchedule() {
  zinc::LrSchedule s;
  bool given = lrSchedule.getNumOccurrences() > 0;
  if (lrSchedule == "linear")
    s.kind = zinc::LrScheduleKind::Linear;
  else if (lrSchedule == "cosine")
    s.kind = zinc::LrScheduleKind::Cosine;
  else if (lrSchedule != "constant")
    return zinc::makeError(
        "--lr-schedule must be constant, linear or cosine, not '" + lrSchedule +
        "'");
  for (auto *flag : {&warmupSteps, &totalSteps})
    if (flag->getNumOccurrences() && !given)
      return zinc::makeError("--" + flag->ArgStr +
                             " needs --lr-schedule=constant|linear|cosine");
  if (given && optimizer == "none")
    return zinc::makeError(
        "--lr-schedule has no update to schedule with --optimizer=none");
  if (warmupSteps < 0)
    return zinc::makeError(
        "--warmup-steps=" + llvm::Twine(int64_t(warmupSteps)) +
        " must not be negative");
  if (s.kind == zinc::LrScheduleKind::Constant) {
    if (totalSteps.getNumOccurrences())
      return zinc::makeError(
          "--total-steps has no effect with --lr-schedule=constant "
          "(a constant rate after --warmup-steps)");
  } else if (totalSteps < 1) {
    return zinc::makeError(
        "--lr-schedule=" + lrSchedule +
        " needs --total-steps=T >= 1, the update at which its decay ends");
  }
  s.warmupSteps = warmupSteps;
  s.totalSteps =
      s.kind == zinc::LrScheduleKind::Constant ? 0 : int64_t(totalSteps);
  return s;
}

static Expected<zinc::OffloadPolicy> parsePolicy(StringRef flag, StringRef value) {
  if (value == "auto")
    return zinc::OffloadPolicy::Auto;
  if (value == "none")
    return zinc::OffloadPolicy::None;
  auto tier = zinc::parseTierName(value);
  if (tier == zinc::MemoryTier::Cpu)
    return zinc::OffloadPolicy::Cpu;
  if (tier == zinc::MemoryTier::Nvme)
    return zinc::OffloadPolicy::Nvme;
  return zinc::makeError("--" + flag + " must be auto, none, cpu or nvme, not '" + value + "'");
}

/// The phases around the passes (import, emission, the plan verifier,
/// writing), timed with --time-passes next to the passes' own report.
class PhaseTimers {
public:
  void enable() { group = std::make_unique<TimerGroup>("zinc-compile", "zinc-compile phases"); }
  /// Times the rest of the enclosing scope as `name`.
  std::unique_ptr<TimeRegion> time(StringRef name) {
    if (!group)
      return nullptr;
    timers.push_back(std::make_unique<Timer>(name, name, *group));
    return std::make_unique<TimeRegion>(*timers.back());
  }
  ~PhaseTimers() {
    if (group)
      group->print(errs(), /*ResetAfterPrint=*/true);
  }

private:
  std::unique_ptr<TimerGroup> group;
  std::vector<std::unique_ptr<Timer>> timers;
};


static Error compile() {
  if (mode != "train" && mode != "infer")
    return zinc::makeError("--mode must be train or infer, not '" + mode + "'");
  zinc::TrainingOptions training;
  training.mode = mode == "train" ? zinc::CompileMode::Train : zinc::CompileMode::Infer;
  if (precision == "fp32")
    training.precision = zinc::PrecisionKind::FP32;
  else if (precision == "bf16")
    training.precision = zinc::PrecisionKind::BF16;
  else if (precision == "fp16")
    training.precision = zinc::PrecisionKind::FP16;
  else
    return zinc::makeError("--precision must be fp32, bf16 or fp16, not '" + precision + "'");
  if (lossScale.empty())
    training.lossScale = training.precision == zinc::PrecisionKind::FP16
                             ? zinc::LossScaleKind::Dynamic
                             : zinc::LossScaleKind::None;
  else if (lossScale == "dynamic")
    training.lossScale = zinc::LossScaleKind::Dynamic;
  else if (lossScale == "none")
    training.lossScale = zinc::LossScaleKind::None;
  else {
    double fixed = 0;
    if (StringRef(lossScale).getAsDouble(fixed) || !(fixed > 0) || !std::isfinite(fixed))
      return zinc::makeError("--loss-scale must be dynamic, none or a positive number, not '" +
                             lossScale + "'");
    training.lossScale = zinc::LossScaleKind::Static;
    training.initialLossScale = fixed;
  }
  if (training.lossScale == zinc::LossScaleKind::Dynamic)
    training.initialLossScale = initialLossScale;
  if (!(initialLossScale > 0) || !std::isfinite(initialLossScale))
    return zinc::makeError("--initial-loss-scale must be a positive number");
  if (lossScaleGrowthInterval < 1)
    return zinc::makeError("--loss-scale-growth-interval must be at least 1");
  training.lossScaleGrowthInterval = lossScaleGrowthInterval;
  if (training.precision == zinc::PrecisionKind::FP32 &&
      training.lossScale != zinc::LossScaleKind::None)
    return zinc::makeError("--loss-scale needs --precision=fp16 or bf16");
  training.loss = lossName;
  training.freeze = freeze;
  if (optimizer == "adamw")
    training.optimizer = zinc::OptimizerKind::AdamW;
  else if (optimizer == "adam")
    training.optimizer = zinc::OptimizerKind::Adam;
  else if (optimizer == "sgd")
    training.optimizer = zinc::OptimizerKind::SGD;
  else if (optimizer == "none")
    training.optimizer = zinc::OptimizerKind::None;
  else
    return zinc::makeError("--optimizer must be adamw, adam, sgd or none, not '" +
                           optimizer + "'");
  training.lr = lr;
  training.beta1 = beta1;
  training.beta2 = beta2;
  training.eps = eps;
  training.weightDecay = weightDecay >= 0 ? double(weightDecay)
                         : training.optimizer == zinc::OptimizerKind::AdamW ? 0.01
                                                                            : 0.0;
  training.momentum = momentum;
  training.nesterov = nesterov;
  training.fuseAttention = fuseAttention;
  if (gradAccum.getNumOccurrences()) {
    if (gradAccum < 1 || gradAccum > (int64_t(1) << 20))
      return zinc::makeError("--grad-accum=" + llvm::Twine(int64_t(gradAccum)) +
                             " must be between 1 and 1048576 micro-batches");
    if (gradAccum > 1 && mode != "train")
      return zinc::makeError("--grad-accum sums the gradients of a training step: it "
                             "needs --mode=train");
    if (gradAccum > 1 && training.optimizer == zinc::OptimizerKind::None)
      return zinc::makeError("--grad-accum sums gradients for an update: it has no "
                             "effect with --optimizer=none");
    training.gradAccum = gradAccum;
  }
  if (gradReduce.getNumOccurrences()) {
    if (gradReduce != "auto" && gradReduce != "micro-batch" && gradReduce != "step")
      return zinc::makeError("--grad-reduce: unknown value '" + gradReduce +
                             "' (expected auto, micro-batch or step)");
    if (training.gradAccum <= 1)
      return zinc::makeError("--grad-reduce chooses when accumulated gradients are "
                             "reduced: it needs --grad-accum above 1");
    if (gradReduce == "step")
      training.gradReduce = zinc::TrainingOptions::GradReduce::Step;
  }
  if (clipGradNorm.getNumOccurrences()) {
    if (training.optimizer == zinc::OptimizerKind::None)
      return zinc::makeError("--clip-grad-norm clips the gradients an update reads: it "
                             "has no effect with --optimizer=none");
    // 0 stands for "none" in the options: refused here, where it was given;
    // checkHyperParameters refuses the other bad values.
    if (clipGradNorm == 0)
      return zinc::makeError("--clip-grad-norm=0 is not a valid maximum norm: it must be "
                             "a finite number > 0");
    training.clipGradNorm = clipGradNorm;
  }
  // The default (-1) means "the optimizer's"; a value given is checked.
  if (weightDecay.getNumOccurrences())
    training.weightDecay = weightDecay;
  if (auto err = zinc::checkHyperParameters(training))
    return err;
  if (nesterov && momentum <= 0)
    return zinc::makeError("--nesterov needs --momentum greater than 0");
  auto schedule = parseLrSchedule();
  if (!schedule)
    return schedule.takeError();
  training.lrSchedule = *schedule;
  if (emit != "binary" && emit != "text")
    return zinc::makeError("--emit must be binary or text, not '" + emit + "'");

  auto hw = zinc::loadHardware(hwName);
  if (!hw)
    return hw.takeError();
  auto gpu = capacity("gpu-mem", gpuMem, hw->gpuMem);
  auto cpu = capacity("cpu-mem", cpuMem, hw->cpuMem);
  auto nvme = capacity("nvme-mem", nvmeMem, hw->nvmeMem);
  if (!gpu || !cpu || !nvme)
    return joinErrors(joinErrors(gpu.takeError(), cpu.takeError()), nvme.takeError());
  hw->gpuMem = *gpu;
  hw->cpuMem = *cpu;
  hw->nvmeMem = *nvme;

  auto optimizerPolicy = parsePolicy("offload-optimizer", offloadOptimizer);
  if (!optimizerPolicy)
    return optimizerPolicy.takeError();
  auto paramsPolicy = parsePolicy("offload-params", offloadParams);
  if (!paramsPolicy)
    return paramsPolicy.takeError();

  if (ranks < 1 || ranks > zinc::kMaxRanks)
    return zinc::makeError("--ranks must be between 1 and " + Twine(zinc::kMaxRanks) +
                           ", not " + Twine(ranks));
  if (zeroStage > 3)
    return zinc::makeError("--zero-stage must be 0, 1, 2 or 3, not " + Twine(zeroStage));
  zinc::passes::PassContext ctx;
  ctx.training = training;
  ctx.zero.ranks = ranks;
  ctx.zero.stage = zeroStage;
  ctx.memory.gpuCapacity = hw->gpuMem;
  ctx.memory.cpuCapacity = hw->cpuMem;
  ctx.memory.nvmeCapacity = hw->nvmeMem;
  ctx.memory.prefetchDistance = prefetchDistance;
  ctx.memory.searchPrefetchLead = prefetchDistance.getNumOccurrences() == 0;
  ctx.memory.hoistIntoStalls = reorderCompute;
  if (!bucketBytes.empty()) {
    auto bytes = capacity("bucket-bytes", bucketBytes, 0);
    if (!bytes)
      return bytes.takeError();
    ctx.memory.bucketBytes = *bytes;
    ctx.memory.bucketBytesFixed = true;
  }
  ctx.hardware = &*hw;
  ctx.memory.delayUpdates = delayUpdates;
  if (delayedUpdates == "auto")
    ctx.memory.delayedUpdatePlacement = zinc::DelayedUpdatePlacement::Auto;
  else if (delayedUpdates == "start")
    ctx.memory.delayedUpdatePlacement = zinc::DelayedUpdatePlacement::AtStart;
  else if (delayedUpdates == "spread")
    ctx.memory.delayedUpdatePlacement = zinc::DelayedUpdatePlacement::Spread;
  else
    return zinc::makeError("--dpu-updates must be auto, start or spread, not '" +
                           delayedUpdates + "'");
  if (delayedUpdates.getNumOccurrences() && !delayUpdates)
    return zinc::makeError("--dpu-updates places the delayed updates of --dpu: add --dpu");
  if (delayUpdates && training.gradAccum > 1)
    return zinc::makeError("--grad-accum cannot be combined with --dpu: a delayed update "
                           "would apply a step's accumulated gradients while the next "
                           "step's micro-batches add into them");
  if (delayUpdates && (mode != "train" || training.optimizer == zinc::OptimizerKind::None))
    return zinc::makeError("--dpu delays the optimizer's update: it needs --mode=train and an "
                           "optimizer");
  ctx.memory.optimizerOffload = *optimizerPolicy;
  ctx.memory.paramsOffload = *paramsPolicy;
  if (auto err = parseTile(tile, ctx.memory))
    return err;
  if (activationCheckpointing == "auto")
    ctx.memory.checkpointMode = zinc::CheckpointMode::Auto;
  else if (activationCheckpointing == "none")
    ctx.memory.checkpointMode = zinc::CheckpointMode::None;
  else if (activationCheckpointing == "every-layer")
    ctx.memory.checkpointMode = zinc::CheckpointMode::EveryLayer;
  else
    return zinc::makeError("--activation-checkpointing must be auto, none or every-layer, not '" +
                           activationCheckpointing + "'");
  ctx.note = [](const Twine &msg) { zinc::printNote(tool, msg); };
  zinc::passes::PassManager pm(ctx);
  pm.setVerifyEach(verifyEach);
  if (auto err = zinc::passes::applyPassManagerCLOptions(pm))
    return err;
  pm.addDefaultPipeline();
  PhaseTimers phases;
  if (pm.getTimePasses())
    phases.enable();
  if (printPipeline) {
    outs() << pm.getPipeline() << "\n";
    return Error::success();
  }
  if (modelPath.empty())
    return zinc::makeError("no MODEL given (usage: zinc-compile MODEL -o PLAN [options])");
  if (outputPath.empty())
    return zinc::makeError("no output plan given: use -o PLAN");

  zinc::frontend::ImportOptions importOpts;
  for (StringRef binding : dims) {
    auto [name, value] = binding.split('=');
    int64_t n = 0;
    if (name.empty() || value.getAsInteger(10, n) || n <= 0)
      return zinc::makeError("--dim expects NAME=VALUE with a positive integer, got '" +
                             binding + "'");
    importOpts.dims[name] = n;
  }
  importOpts.warn = [](const Twine &msg) { zinc::printWarning(tool, msg); };
  auto importing = phases.time("import");
  auto graph = zinc::frontend::importOnnxModel(modelPath, importOpts);
  if (!graph)
    return graph.takeError();
  importing.reset();
  bool adaptive = ctx.memory.tileMode == zinc::TileMode::Auto ||
                  ctx.memory.checkpointMode == zinc::CheckpointMode::Auto;
  zinc::MemoryOptions asGiven = ctx.memory;
  bool chooseReduce = gradReduce == "auto" && mode == "train" && training.gradAccum > 1 &&
                      ranks > 1 && zeroStage >= 2;
  std::unique_ptr<zinc::ir::Graph> imported =
      adaptive || chooseReduce ? (*graph)->clone() : nullptr;
  // The evaluation program starts from the graph as imported.
  std::unique_ptr<zinc::ir::Graph> forEval =
      mode == "train" ? (*graph)->clone() : nullptr;
  if (chooseReduce) {
    auto choosing = phases.time("--grad-reduce=auto");
    ctx.training.gradReduce =
        zinc::planning::chooseGradReduce(*imported, ctx, asGiven, *hw, verifyEach);
  }
  if (Error err = zinc::planning::runWithBudgetRetry(
          pm, ctx, *graph, adaptive ? imported.get() : nullptr, asGiven,
          [&](unsigned divisor) {
            ctx.note("the GPU tier overflowed with tiles and checkpoints aimed at 1/" +
                     Twine(divisor / 2) + " of it; compiling again aiming at 1/" +
                     Twine(divisor));
          }))
    return zinc::addContext(std::move(err), modelPath);

  // Inference needs no loss, but reports the one there is.
  auto loss = zinc::findLossOutput(**graph, lossName);
  if (!loss) {
    if (mode == "train" || !lossName.empty())
      return zinc::addContext(loss.takeError(), modelPath);
    consumeError(loss.takeError());
    loss = nullptr;
  }
  zinc::EmitOptions emitOpts;
  emitOpts.mode = mode;
  emitOpts.hw = hw->name;
  emitOpts.hardwareJson = zinc::hardwareToJson(*hw);
  emitOpts.gpuCapacity = hw->gpuMem;
  emitOpts.cpuCapacity = hw->cpuMem;
  emitOpts.nvmeCapacity = hw->nvmeMem;
  emitOpts.loss = *loss;
  emitOpts.layout = ctx.layout.get();
  emitOpts.zeroStage = zeroStage;
  emitOpts.gradAccum = static_cast<unsigned>(training.gradAccum);
  auto emitting = phases.time("emit");
  auto plan = zinc::emitPlan(**graph, emitOpts);
  emitting.reset();
  if (!plan)
    return zinc::addContext(plan.takeError(), modelPath);
  if (forEval) {
    auto evaluating = phases.time("eval program");
    // A model that trains but whose inference form cannot be planned still
    // gets its training plan; zinc-run --eval-data then says why not.
    auto evalPlan =
        zinc::planning::buildEvalPlan(std::move(forEval), ctx, asGiven, *hw, verifyEach);
    if (evalPlan)
      *plan->mutable_eval() = std::move(*evalPlan);
    else
      zinc::printWarning(tool, "no evaluation program in the plan (zinc-run "
                               "--eval-data will refuse it): " +
                                   toString(evalPlan.takeError()));
  }
  // The independent check of memory and ordering: a plan zinc writes never
  // touches a non-resident tensor or races between streams. It runs on a
  // second thread while the plan is encoded; only a verified plan is written.
  auto verifying = phases.time("plan verifier");
  std::future<Error> verified = std::async(std::launch::async, [&, region = std::move(verifying)]() mutable {
    Error err = zinc::plan::verifyPlan(*plan);
    region.reset();
    return err;
  });
  // The cost model's view of the step: what the report predicts and the
  // summary says.
  auto simulating = phases.time("simulate");
  auto prediction = zinc::plan::simulatePlan(*plan, *hw);
  simulating.reset();
  if (!prediction) {
    consumeError(verified.get());
    return zinc::addContext(prediction.takeError(), modelPath);
  }
  // The search predicted from the graph what the plan now says; they are
  // one program, so a difference is a bug in one of the two.
  if (ctx.predictedLayout && ctx.predictedLayout == ctx.layout &&
      ctx.predictedStepSeconds != prediction->stepSeconds) {
    consumeError(verified.get());
    return zinc::makeError(
        llvm::formatv("internal error: the plan's predicted step ({0:e} s) is "
                      "not what the placement search predicted for it ({1:e} s)",
                      prediction->stepSeconds, ctx.predictedStepSeconds)
            .str());
  }
  auto writing = phases.time("report and plan file");
  std::string bytes = zinc::plan::encodePlan(
      *plan, emit == "text" ? zinc::plan::PlanEncoding::Text : zinc::plan::PlanEncoding::Binary);
  // Staged beside the output while the verifier works; put in place only
  // once it accepts the plan.
  auto staged = zinc::plan::stagePlanFile(bytes, outputPath);
  if (!staged) {
    consumeError(verified.get());
    return staged.takeError();
  }
  std::string report;
  if (!reportPath.empty()) {
    zinc::CompileConfig config;
    config.mode = mode;
    config.ranks = ranks;
    config.zeroStage = zeroStage;
    config.precision = precision;
    config.optimizer = optimizer;
    config.tiling = ctx.memory.tiled;
    config.checkpointing = ctx.memory.checkpointing;
    config.checkpointMode = activationCheckpointing;
    config.optimizerTier = ctx.memory.optimizerTier;
    config.paramsTier = ctx.memory.paramsTier;
    llvm::json::Value built = zinc::buildCompileReport(**graph, *plan, config, *hw);
    built.getAsObject()->try_emplace("predicted", zinc::plan::predictionSummary(*prediction));
    report = formatv("{0:2}", std::move(built)).str() + "\n";
  }
  // Nothing is written for a plan the verifier refuses.
  if (Error err = verified.get())
    return zinc::addContext(std::move(err), modelPath);
  if (!reportPath.empty())
    if (Error err = zinc::writeOutputFile(
            reportPath, [&](raw_ostream &os) {
              os << report;
              return Error::success();
            }))
      return err;
  if (Error err = staged->commit())
    return err;
  writing.reset();
  ctx.note("plan: " + zinc::plan::planSummary(*plan, *prediction));
  // The graph and the plan are left for the process's exit to reclaim, as
  // clang's -disable-free does: freeing 10^6 nodes one by one takes a
  // second and gives the memory to no one.
  BuryPointer(std::move(*graph));
  BuryPointer(std::make_unique<zinc::plan::Plan>(std::move(*plan)));
  return Error::success();
}

static int toolMain(int argc, char **argv) {
#ifdef __GLIBC__
  // The planner's trials each free a graph of 10^5..10^6 nodes, millions
  // of small blocks (names, use lists), then ask for large vectors. glibc
  // parks small frees in fast bins and merges them all on the next large
  // request (malloc_consolidate, a few percent of a compile in perf); freed
  // straight into the regular bins they merge as they go, and the compile
  // is faster and smaller (bench/README.md).
  mallopt(M_MXFAST, 0);
#endif
  InitLLVM init(argc, argv);
  zinc::reportFileSizeLimitAsWriteErrors();
  zinc::passes::registerPassManagerCLOptions(compileCategory);
  cl::HideUnrelatedOptions(compileCategory);
  cl::ParseCommandLineOptions(argc, argv, "zinc-compile: ONNX model to zinc plan\n");
  if (auto err = compile()) {
    zinc::printError(tool, std::move(err));
    return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  // What the tool printed must have reached its standard output.
  return zinc::finishStandardOutput("zinc-compile", toolMain(argc, argv));
}
