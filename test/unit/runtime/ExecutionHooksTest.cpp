//===- ExecutionHooksTest.cpp - The executor's contract with a device backend
//===//
//
// The cuda backend plugs into the executor through ExecutionHooks. Its own
// tests need a GPU; these check, on any machine, with hooks that run every
// instruction on the host and record what they were asked, that the
// executor keeps its side of the contract: every instruction goes through
// run() once per step, beforeRun() comes after the host-side waits of an
// instruction that has waits, the step ends with finishStep(), the peak is
// the hooks' measurement, and a hook's error stops the step naming the node.
//
//===----------------------------------------------------------------------===//
#include "PlanBuilder.h"
#include "zinc/support/Error.h"
#include <mutex>
#include <set>
#include <tuple>

using namespace zinc;
using namespace zinc::rt;
using namespace zinc::rt::test;

namespace {

/// Runs everything on the host (the cpu backend's way) and records calls.
class RecordingHooks : public ExecutionHooks {
public:
  explicit RecordingHooks(Program &program) : program(program) {}

  llvm::Error beforeRun(const PreparedInstruction &inst) override {
    std::lock_guard<std::mutex> lock(mutex);
    unsigned index = indexOf(inst);
    waited.insert(index);
    // Every instruction it waits for has already run (its signals counted).
    for (auto [event, count] : inst.waits) {
      unsigned seen = 0;
      for (unsigned done : ranThisStep)
        for (uint32_t e : program.instructions()[done].signals)
          seen += e == event;
      if (seen < count)
        waitedTooEarly = true;
    }
    if (failBefore == static_cast<int>(index))
      return makeError("device wait failed");
    return llvm::Error::success();
  }
  bool deviceReady(const PreparedInstruction &) override { return true; }
  llvm::Error run(PreparedInstruction &inst, unsigned index,
                  const StepContext &ctx, TransferBytes &bytes) override {
    {
      std::lock_guard<std::mutex> lock(mutex);
      ++runs;
      ranThisStep.push_back(index);
      contexts.insert({ctx.step, ctx.microBatch, ctx.microBatches});
    }
    return runOnHost(program, inst, ctx, bytes);
  }
  llvm::Error skip(const PreparedInstruction &, unsigned index) override {
    std::lock_guard<std::mutex> lock(mutex);
    skipped.push_back(index);
    // Counted as run for the waits of those after it: its signals still
    // order them.
    ranThisStep.push_back(index);
    return llvm::Error::success();
  }
  llvm::Error finishStep() override {
    std::lock_guard<std::mutex> lock(mutex);
    ++finished;
    ranThisStep.clear();
    return llvm::Error::success();
  }
  llvm::Error finishInstruction(const PreparedInstruction &) override {
    ++instructionsFinished;
    return llvm::Error::success();
  }
  llvm::Expected<uint64_t> measuredGpuPeak() override { return 12345; }
  llvm::Error inputsToDevice(llvm::ArrayRef<uint32_t>) override {
    return llvm::Error::success();
  }
  llvm::Error stateToDevice() override { return llvm::Error::success(); }
  llvm::Error stateToHost() override { return llvm::Error::success(); }

  unsigned indexOf(const PreparedInstruction &inst) const {
    return static_cast<unsigned>(&inst - program.instructions().data());
  }

  Program &program;
  std::mutex mutex;
  unsigned runs = 0, finished = 0, instructionsFinished = 0;
  std::set<unsigned> waited;
  std::vector<unsigned> ranThisStep;
  std::vector<unsigned> skipped;
  /// (step, micro-batch, micro-batches) of every run() call.
  std::set<std::tuple<int64_t, int64_t, int64_t>> contexts;
  bool waitedTooEarly = false;
  int failBefore = -1;
};

/// Prefetch on h2d, add on compute, evict on d2h, `layers` times.
plan::Plan threeStreamPlan(int layers, int64_t n, std::vector<int> &weights) {
  PlanBuilder b;
  int act = b.tensor("x", {n}, plan::TIER_GPU, 1, plan::ROLE_INPUT);
  uint32_t event = 0;
  for (int l = 0; l < layers; ++l) {
    std::string s = std::to_string(l);
    int wCpu = b.tensor("w" + s, {n}, plan::TIER_CPU, 1, plan::ROLE_PARAMETER);
    int wGpu = b.tensor("w" + s + ".gpu", {n});
    int y = b.tensor("y" + s, {n});
    int yCpu = b.tensor("y" + s + ".cpu", {n}, plan::TIER_CPU);
    uint32_t fetched = event++, computed = event++;
    b.add("prefetch" + s, "Copy", {wCpu}, {wGpu}, plan::STREAM_H2D, {}, {fetched});
    b.add("add" + s, "Add", {act, wGpu}, {y}, plan::STREAM_COMPUTE, {fetched},
          {computed});
    b.add("evict" + s, "Copy", {y}, {yCpu}, plan::STREAM_D2H, {computed});
    weights.push_back(wCpu);
    act = y;
  }
  return b.finish();
}

TEST(ExecutionHooks, EveryInstructionRunsThroughThemAfterItsWaits) {
  std::vector<int> weights;
  plan::Plan plan = threeStreamPlan(4, 1024, weights);
  auto program = loadOrFail(plan);
  ASSERT_TRUE(program);
  for (int w : weights)
    setValues(*program, w, 1, 0.5f);
  RecordingHooks hooks(*program);
  ExecutorOptions opts;
  opts.hooks = &hooks;
  auto executor = Executor::create(*program, opts);
  ASSERT_TRUE(static_cast<bool>(executor)) << llvm::toString(executor.takeError());
  const unsigned steps = 3;
  for (unsigned s = 0; s < steps; ++s) {
    auto result = (*executor)->run(s + 1, false);
    ASSERT_TRUE(static_cast<bool>(result)) << llvm::toString(result.takeError());
    EXPECT_EQ(result->measuredGpuPeak, 12345u);
    EXPECT_EQ(result->bytes.h2d, 4u * 1024 * 4);
  }
  EXPECT_EQ(hooks.runs, steps * plan.instructions_size());
  EXPECT_EQ(hooks.finished, steps);
  EXPECT_FALSE(hooks.waitedTooEarly);
  std::set<unsigned> withWaits;
  for (unsigned i = 0; i < program->instructions().size(); ++i)
    if (!program->instructions()[i].waits.empty())
      withWaits.insert(i);
  EXPECT_EQ(hooks.waited, withWaits);
}

// Gradient accumulation: an update_only instruction outside the last
// micro-batch goes through skip() instead of run(), after beforeRun() like
// any other, and what waits for it still comes after; every run() is told
// the micro-batch.
TEST(ExecutionHooks, UpdateOnlyInstructionsAreSkippedBeforeTheLastMicroBatch) {
  std::vector<int> weights;
  plan::Plan plan = threeStreamPlan(3, 256, weights);
  std::set<unsigned> updateOnly;
  for (int i = 0; i < plan.instructions_size(); ++i)
    if (plan.instructions(i).name() == "prefetch1" ||
        plan.instructions(i).name() == "evict2") {
      plan.mutable_instructions(i)->set_update_only(true);
      updateOnly.insert(i);
    }
  ASSERT_EQ(updateOnly.size(), 2u);
  for (bool serial : {false, true}) {
    SCOPED_TRACE(serial ? "serial" : "concurrent");
    auto program = loadOrFail(plan);
    ASSERT_TRUE(program);
    RecordingHooks hooks(*program);
    ExecutorOptions opts;
    opts.serial = serial;
    opts.hooks = &hooks;
    auto executor = Executor::create(*program, opts);
    ASSERT_TRUE(static_cast<bool>(executor));
    const unsigned micros = 4;
    for (unsigned micro = 0; micro < micros; ++micro) {
      hooks.skipped.clear();
      unsigned before = hooks.runs;
      auto result = (*executor)->run(7, false, micro, micros);
      ASSERT_TRUE(static_cast<bool>(result))
          << llvm::toString(result.takeError());
      bool last = micro + 1 == micros;
      std::set<unsigned> skipped(hooks.skipped.begin(), hooks.skipped.end());
      EXPECT_EQ(skipped, last ? std::set<unsigned>() : updateOnly) << micro;
      EXPECT_EQ(hooks.runs - before,
                plan.instructions_size() - (last ? 0 : updateOnly.size()));
      // Three prefetches, one of them skipped.
      EXPECT_EQ(result->bytes.h2d, (last ? 3u : 2u) * 256 * 4) << micro;
    }
    EXPECT_FALSE(hooks.waitedTooEarly);
    EXPECT_EQ(hooks.contexts, (std::set<std::tuple<int64_t, int64_t, int64_t>>{
                                  {7, 0, 4}, {7, 1, 4}, {7, 2, 4}, {7, 3, 4}}));
  }
}

TEST(ExecutionHooks, SerialRunsFinishEachInstruction) {
  std::vector<int> weights;
  plan::Plan plan = threeStreamPlan(2, 64, weights);
  auto program = loadOrFail(plan);
  ASSERT_TRUE(program);
  RecordingHooks hooks(*program);
  ExecutorOptions opts;
  opts.serial = true;
  opts.hooks = &hooks;
  auto executor = Executor::create(*program, opts);
  ASSERT_TRUE(static_cast<bool>(executor));
  ASSERT_TRUE(static_cast<bool>((*executor)->run(1, false)));
  EXPECT_EQ(hooks.instructionsFinished,
            static_cast<unsigned>(plan.instructions_size()));
  EXPECT_EQ(hooks.finished, 1u);
}

TEST(ExecutionHooks, AFailedDeviceWaitStopsTheStepNamingTheNode) {
  std::vector<int> weights;
  plan::Plan plan = threeStreamPlan(3, 64, weights);
  auto program = loadOrFail(plan);
  ASSERT_TRUE(program);
  RecordingHooks hooks(*program);
  // add1: the second layer's compute, which waits for its prefetch.
  for (unsigned i = 0; i < program->instructions().size(); ++i)
    if (program->instructions()[i].source->name() == "add1")
      hooks.failBefore = static_cast<int>(i);
  ASSERT_GE(hooks.failBefore, 0);
  ExecutorOptions opts;
  opts.hooks = &hooks;
  auto executor = Executor::create(*program, opts);
  ASSERT_TRUE(static_cast<bool>(executor));
  EXPECT_EQ(errorOf((*executor)->run(1, false)),
            "node 'add1' (Add): device wait failed");
}

TEST(ExecutionHooks, CheckingNumericsIsRefusedWithADevice) {
  std::vector<int> weights;
  auto program = loadOrFail(threeStreamPlan(1, 64, weights));
  ASSERT_TRUE(program);
  RecordingHooks hooks(*program);
  ExecutorOptions opts;
  opts.checkNumerics = true;
  opts.hooks = &hooks;
  EXPECT_EQ(errorOf(Executor::create(*program, opts)),
            "--check-numerics reads tensors in host memory; the cuda backend "
            "does not support it yet (use --backend=cpu)");
}

} // namespace
