//===- ExecutorTest.cpp - Streams, events and copies of the cpu backend ---===//
#include "PlanBuilder.h"
#include <cmath>
#include <functional>

using namespace zinc;
using namespace zinc::rt;
using namespace zinc::rt::test;

namespace {

/// What a run of `steps` steps left behind.
struct RunOutcome {
  std::unique_ptr<Program> program;
  std::vector<StepResult> results;
};

/// Loads `plan`, lets `init` set values, runs `steps` steps in the given mode
/// (`feed` runs before each, as the step loop's input feeding does).
RunOutcome runPlan(const plan::Plan &plan, bool serial, int steps,
                   const std::function<void(Program &)> &init,
                   const std::function<void(Program &, int)> &feed = nullptr) {
  RunOutcome run;
  run.program = loadOrFail(plan);
  if (!run.program)
    return run;
  init(*run.program);
  auto executor = Executor::create(*run.program, {serial});
  EXPECT_TRUE(static_cast<bool>(executor))
      << llvm::toString(executor.takeError());
  if (!executor)
    return run;
  EXPECT_EQ((*executor)->numThreads() == 0, serial);
  for (int s = 0; s < steps; ++s) {
    if (feed)
      feed(*run.program, s);
    auto result = (*executor)->run(s + 1, /*recordTimings=*/true);
    EXPECT_TRUE(static_cast<bool>(result))
        << llvm::toString(result.takeError());
    if (!result)
      return run;
    run.results.push_back(std::move(*result));
  }
  return run;
}

/// Runs concurrently and serially and checks every tensor and counter
/// agrees bit for bit; returns the concurrent run.
RunOutcome
runBothWays(const plan::Plan &plan, int steps,
            const std::function<void(Program &)> &init,
            const std::function<void(Program &, int)> &feed = nullptr) {
  RunOutcome concurrent = runPlan(plan, false, steps, init, feed);
  RunOutcome serial = runPlan(plan, true, steps, init, feed);
  EXPECT_TRUE(concurrent.program && serial.program);
  if (!concurrent.program || !serial.program)
    return concurrent;
  EXPECT_EQ(snapshot(*concurrent.program), snapshot(*serial.program))
      << "the concurrent run differs from the plan-order run";
  EXPECT_EQ(concurrent.results.size(), serial.results.size());
  for (size_t i = 0;
       i < std::min(concurrent.results.size(), serial.results.size()); ++i) {
    const StepResult &a = concurrent.results[i], &b = serial.results[i];
    EXPECT_EQ(a.measuredGpuPeak, b.measuredGpuPeak);
    EXPECT_EQ(a.measuredCpuPeak, b.measuredCpuPeak);
    EXPECT_EQ(a.bytes.h2d, b.bytes.h2d);
    EXPECT_EQ(a.bytes.d2h, b.bytes.d2h);
    EXPECT_EQ(a.bytes.nvmeRead, b.bytes.nvmeRead);
    EXPECT_EQ(a.bytes.nvmeWrite, b.bytes.nvmeWrite);
  }
  return concurrent;
}

uint64_t tierPeak(const plan::Plan &plan, plan::Tier tier) {
  for (const plan::TierInfo &info : plan.tiers())
    if (info.tier() == tier)
      return info.peak();
  return 0;
}

/// A tier's proven peak rounded up to a page: what the arena opens, and so
/// the most a measured peak (page resolution) can be.
uint64_t pagePeak(const plan::Plan &plan, plan::Tier tier) {
  return llvm::alignTo(tierPeak(plan, tier), 4096);
}

/// Every wait started after the signals it waits for ended.
void expectEventOrder(const Program &program, const StepResult &result) {
  const plan::Plan &plan = program.getPlan();
  ASSERT_EQ(result.timings.size(),
            static_cast<size_t>(plan.instructions_size()));
  for (int i = 0; i < plan.instructions_size(); ++i) {
    EXPECT_LE(result.timings[i].start, result.timings[i].end);
    EXPECT_EQ(result.timings[i].stream, plan.instructions(i).stream());
    for (uint32_t e : plan.instructions(i).wait_events())
      for (int j = 0; j < i; ++j)
        for (uint32_t s : plan.instructions(j).signal_events()) {
          if (s == e)
            EXPECT_LE(result.timings[j].end, result.timings[i].start)
                << plan.instructions(i).name() << " started before "
                << plan.instructions(j).name() << " signalled event " << e;
        }
  }
}

// A GPU-only plan: one compute worker, the serial result, and the measured
// GPU high-water mark reaches the page of the plan's proven peak (the last
// tensor is touched).
TEST(Executor, GpuOnlyPlan) {
  PlanBuilder b;
  int x = b.tensor("x", {3, 5}), y = b.tensor("y", {3, 5}),
      z = b.tensor("z", {3, 5}), w = b.tensor("w", {3, 5});
  b.add("add", "Add", {x, y}, {z});
  b.add("mul", "Mul", {z, x}, {w});
  plan::Plan plan = b.finish();
  RunOutcome run = runBothWays(plan, 2, [&](Program &p) {
    setValues(p, x, 1, 0.5f);
    setValues(p, y, -2, 0.25f);
  });
  ASSERT_TRUE(run.program);
  std::vector<float> xs = values(*run.program, x), ys = values(*run.program, y),
                     ws = values(*run.program, w);
  for (size_t i = 0; i < ws.size(); ++i)
    EXPECT_EQ(ws[i], (xs[i] + ys[i]) * xs[i]);
  ASSERT_EQ(run.results.size(), 2u);
  EXPECT_EQ(run.results[1].measuredGpuPeak, pagePeak(plan, plan::TIER_GPU));
  EXPECT_EQ(run.results[1].measuredCpuPeak, 0u);
  EXPECT_EQ(run.results[1].bytes.h2d + run.results[1].bytes.d2h, 0u);
}

/// A CPU-homed weight of `layers` layers, each prefetched on h2d, added to
/// the activation on compute, and the result evicted on d2h.
struct PrefetchPlan {
  plan::Plan plan;
  int x = -1;
  std::vector<int> weightsCpu, outsCpu;
};

PrefetchPlan prefetchPlan(int layers, int64_t n) {
  PlanBuilder b;
  PrefetchPlan out;
  out.x = b.tensor("x", {n}, plan::TIER_GPU, 1, plan::ROLE_INPUT);
  int act = out.x;
  uint32_t event = 0;
  for (int l = 0; l < layers; ++l) {
    std::string s = std::to_string(l);
    int wCpu = b.tensor("w" + s, {n}, plan::TIER_CPU, 1, plan::ROLE_PARAMETER);
    int wGpu = b.tensor("w" + s + ".gpu", {n});
    int y = b.tensor("y" + s, {n});
    int yCpu = b.tensor("y" + s + ".cpu", {n}, plan::TIER_CPU);
    uint32_t fetched = event++, computed = event++;
    b.add("prefetch" + s, "Copy", {wCpu}, {wGpu}, plan::STREAM_H2D, {},
          {fetched});
    b.add("add" + s, "Add", {act, wGpu}, {y}, plan::STREAM_COMPUTE, {fetched},
          {computed});
    b.add("evict" + s, "Copy", {y}, {yCpu}, plan::STREAM_D2H, {computed});
    out.weightsCpu.push_back(wCpu);
    out.outsCpu.push_back(yCpu);
    act = y;
  }
  out.plan = b.finish();
  return out;
}

// h2d prefetch with an event, Add on compute, d2h eviction: three workers,
// events respected, bytes counted per link, bit-exact with plan order.
TEST(Executor, PrefetchComputeEvict) {
  const int64_t n = 1 << 14;
  const int layers = 4, steps = 3;
  PrefetchPlan pp = prefetchPlan(layers, n);
  auto init = [&](Program &p) {
    for (int l = 0; l < layers; ++l)
      setValues(p, pp.weightsCpu[l], 0.125f * l, 0.01f);
  };
  auto feed = [&](Program &p, int step) { setValues(p, pp.x, step, 0.5f); };
  RunOutcome run = runBothWays(pp.plan, steps, init, feed);
  ASSERT_TRUE(run.program);
  ASSERT_EQ(run.results.size(), static_cast<size_t>(steps));
  Program &p = *run.program;
  std::vector<float> expect = values(p, pp.x);
  for (int l = 0; l < layers; ++l) {
    std::vector<float> w = values(p, pp.weightsCpu[l]);
    for (int64_t i = 0; i < n; ++i)
      expect[i] += w[i];
    EXPECT_EQ(values(p, pp.outsCpu[l]), expect) << "layer " << l;
  }
  for (const StepResult &r : run.results) {
    EXPECT_EQ(r.bytes.h2d, static_cast<uint64_t>(layers * n * 4));
    EXPECT_EQ(r.bytes.d2h, static_cast<uint64_t>(layers * n * 4));
    EXPECT_EQ(r.bytes.nvmeRead + r.bytes.nvmeWrite, 0u);
    EXPECT_EQ(r.measuredGpuPeak, pagePeak(pp.plan, plan::TIER_GPU));
    EXPECT_EQ(r.measuredCpuPeak, pagePeak(pp.plan, plan::TIER_CPU));
    expectEventOrder(p, r);
  }
}

// Many steps of a deeper plan: the per-step event counts are reset, so a
// later step never runs ahead on an earlier step's signals.
TEST(Executor, EventsAreReArmedEveryStep) {
  PrefetchPlan pp = prefetchPlan(8, 4096);
  RunOutcome run = runBothWays(
      pp.plan, 25, [&](Program &p) { setValues(p, pp.weightsCpu[0], 1, 1); },
      [&](Program &p, int step) { setValues(p, pp.x, step, -0.5f); });
  ASSERT_TRUE(run.program);
  for (const StepResult &r : run.results)
    expectEventOrder(*run.program, r);
}

// ZeRO-Offload's shape: the gradient made on the GPU, evicted, AdamW on the
// host stream over CPU-tier states, the parameter prefetched back.
struct HostAdamWPlan {
  plan::Plan plan;
  int x, p, m;
};

static HostAdamWPlan hostAdamWPlan(int64_t n, int64_t delayedSteps) {
  PlanBuilder b;
  HostAdamWPlan h;
  h.x = b.tensor("x", {n}, plan::TIER_GPU, 1, plan::ROLE_INPUT);
  int pGpu = b.tensor("p.gpu", {n});
  int gGpu = b.tensor("g.gpu", {n});
  h.p = b.tensor("p", {n}, plan::TIER_CPU, 1, plan::ROLE_PARAMETER);
  int g = b.tensor("g", {n}, plan::TIER_CPU);
  h.m = b.tensor("m", {n}, plan::TIER_CPU, 1, plan::ROLE_STATE);
  int v = b.tensor("v", {n}, plan::TIER_CPU, 1, plan::ROLE_STATE);
  b.add("fetch", "Copy", {h.p}, {pGpu}, plan::STREAM_H2D, {}, {0});
  b.add("grad", "Mul", {h.x, pGpu}, {gGpu}, plan::STREAM_COMPUTE, {0}, {1});
  b.add("evict", "Copy", {gGpu}, {g}, plan::STREAM_D2H, {1}, {2});
  plan::Instruction &adam =
      b.add("adam", "AdamW", {h.p, g, h.m, v}, {}, plan::STREAM_HOST, {2});
  plan::Attribute *lr = adam.add_attrs();
  lr->set_name("lr");
  lr->set_kind(plan::ATTR_FLOAT);
  lr->set_f(0.01);
  if (delayedSteps) {
    plan::Attribute *delayed = adam.add_attrs();
    delayed->set_name("delayed_steps");
    delayed->set_kind(plan::ATTR_INT);
    delayed->set_i(delayedSteps);
  }
  h.plan = b.finish();
  return h;
}

/// Trains `h` for `steps` steps with the same input each step, and checks
/// that the parameter ends where torch.optim.AdamW's first step (lr 0.01,
/// defaults otherwise) takes it.
static void expectOneAdamWStep(const HostAdamWPlan &h, int steps) {
  const int64_t n = h.plan.tensors(h.x).shape(0);
  std::vector<float> p0;
  RunOutcome run = runBothWays(
      h.plan, steps,
      [&](Program &prog) {
        setValues(prog, h.p, 0.5f, 0.01f);
        p0 = values(prog, h.p);
      },
      [&](Program &prog, int) { setValues(prog, h.x, -1, 0.03f); });
  ASSERT_TRUE(run.program);
  std::vector<float> xs = values(*run.program, h.x),
                     after = values(*run.program, h.p),
                     ms = values(*run.program, h.m);
  for (int64_t i = 0; i < n; ++i) {
    double grad = static_cast<double>(xs[i]) * p0[i];
    double decayed = p0[i] * (1 - 0.01 * 0.01);
    double mh = (0.1 * grad) / 0.1, vh = (0.001 * grad * grad) / 0.001;
    double want = decayed - 0.01 * mh / (std::sqrt(vh) + 1e-8);
    EXPECT_NEAR(after[i], want, 1e-6) << i;
    EXPECT_NEAR(ms[i], 0.1 * grad, 1e-6) << i;
  }
  // The last step: a skipped update touches none of its states.
  EXPECT_EQ(run.results.back().measuredCpuPeak, pagePeak(h.plan, plan::TIER_CPU));
}

TEST(Executor, HostAdamWOnCpuStates) { expectOneAdamWStep(hostAdamWPlan(1000, 0), 1); }

// --dpu: an update delayed by one step skips the first step (no gradient
// is there yet) and counts the next as torch.optim's first: after two steps
// the parameter is where one undelayed step puts it.
TEST(Executor, DelayedAdamWSkipsItsFirstStep) {
  expectOneAdamWStep(hostAdamWPlan(1000, 1), 2);
}

/// Gradient accumulation's shape: a gradient summed into a GPU accumulator
/// every micro-batch; the eviction, the host update and the refresh are
/// update_only; a compute instruction after them reads the refreshed
/// parameter every micro-batch.
struct AccumulationPlan {
  plan::Plan plan;
  int x, w, accCpu, p, pNew, out;
};

AccumulationPlan accumulationPlan(int64_t n) {
  PlanBuilder b;
  AccumulationPlan a;
  a.x = b.tensor("x", {n}, plan::TIER_GPU, 1, plan::ROLE_INPUT);
  a.w = b.tensor("w", {n}, plan::TIER_GPU, 1, plan::ROLE_PARAMETER);
  int g = b.tensor("g", {n});
  int acc = b.tensor("acc", {n}, plan::TIER_GPU, 1, plan::ROLE_STATE);
  a.accCpu = b.tensor("acc.cpu", {n}, plan::TIER_CPU);
  a.p = b.tensor("p", {n}, plan::TIER_CPU, 1, plan::ROLE_PARAMETER);
  a.pNew = b.tensor("p.new", {n}, plan::TIER_CPU);
  int pGpu = b.tensor("p.gpu", {n});
  a.out = b.tensor("out", {n});
  b.add("grad", "Mul", {a.x, a.w}, {g});
  b.add("accumulate", "AccumulateGrad", {acc, g}, {}, plan::STREAM_COMPUTE, {},
        {0})
      .set_domain("zinc");
  b.add("evict", "Copy", {acc}, {a.accCpu}, plan::STREAM_D2H, {0}, {1})
      .set_update_only(true);
  b.add("update", "Sub", {a.p, a.accCpu}, {a.pNew}, plan::STREAM_HOST, {1}, {2})
      .set_update_only(true);
  b.add("refresh", "Copy", {a.pNew}, {pGpu}, plan::STREAM_H2D, {2}, {3})
      .set_update_only(true);
  b.add("use", "Add", {pGpu, a.x}, {a.out}, plan::STREAM_COMPUTE, {3});
  a.plan = b.finish();
  return a;
}

// update_only instructions do their work only in an optimizer step's last
// micro-batch; in the others they move nothing but still signal after their
// waits, so the instruction after them runs every micro-batch, in order, on
// the parameter of the last update. Concurrent and serial runs agree.
TEST(Executor, UpdateOnlyInstructionsRunInTheLastMicroBatch) {
  const int64_t n = 1000;
  const int micros = 3, steps = 2;
  AccumulationPlan a = accumulationPlan(n);
  std::vector<std::vector<uint8_t>> concurrentEnd;
  for (bool serial : {false, true}) {
    SCOPED_TRACE(serial ? "serial" : "concurrent");
    std::unique_ptr<Program> program = loadOrFail(a.plan);
    ASSERT_TRUE(program);
    Program &prog = *program;
    setValues(prog, a.w, 0.5f, 0.01f);
    setValues(prog, a.p, 2.0f, -0.03f);
    auto executor = Executor::create(prog, {serial});
    ASSERT_TRUE(static_cast<bool>(executor));
    std::vector<float> ps = values(prog, a.p), ws = values(prog, a.w);
    std::vector<float> lastAccCpu(n, 0), lastPNew(n, 0), sum(n, 0);
    for (int step = 1; step <= steps; ++step)
      for (int micro = 0; micro < micros; ++micro) {
        SCOPED_TRACE("step " + std::to_string(step) + " micro-batch " +
                     std::to_string(micro));
        setValues(prog, a.x, step * 10 + micro, 0.25f);
        std::vector<float> xs = values(prog, a.x);
        for (int64_t i = 0; i < n; ++i)
          sum[i] = micro == 0 ? xs[i] * ws[i] : sum[i] + xs[i] * ws[i];
        auto result =
            (*executor)->run(step, /*recordTimings=*/true, micro, micros);
        ASSERT_TRUE(static_cast<bool>(result))
            << llvm::toString(result.takeError());
        expectEventOrder(prog, *result);
        bool last = micro == micros - 1;
        EXPECT_EQ(result->bytes.d2h, last ? uint64_t(n * 4) : 0u);
        EXPECT_EQ(result->bytes.h2d, last ? uint64_t(n * 4) : 0u);
        if (last) {
          lastAccCpu = sum;
          for (int64_t i = 0; i < n; ++i)
            lastPNew[i] = ps[i] - sum[i];
        }
        EXPECT_EQ(values(prog, a.accCpu), lastAccCpu);
        EXPECT_EQ(values(prog, a.pNew), lastPNew);
        std::vector<float> want(n);
        for (int64_t i = 0; i < n; ++i)
          want[i] = lastPNew[i] + xs[i];
        EXPECT_EQ(values(prog, a.out), want);
      }
    if (!serial)
      concurrentEnd = snapshot(prog);
    else
      EXPECT_EQ(snapshot(prog), concurrentEnd);
  }
}

// A kernel error on the host stream while compute and d2h wait on events
// that will now never be signalled: the step returns the error, naming the
// node, instead of hanging; the plan-order run reports the same error.
TEST(Executor, KernelErrorStopsWaitingStreams) {
  PlanBuilder b;
  int a = b.tensor("a", {8});
  int c = b.tensor("c", {8});
  int out = b.tensor("out", {8}, plan::TIER_CPU);
  int p =
      b.tensor("p", {8}, plan::TIER_CPU, 10 /* FLOAT16: AdamW refuses it */);
  int g = b.tensor("g", {8}, plan::TIER_CPU);
  b.add("adam", "AdamW", {p, g}, {}, plan::STREAM_HOST, {}, {0});
  b.add("add", "Add", {a, a}, {c}, plan::STREAM_COMPUTE, {0}, {1});
  b.add("evict", "Copy", {c}, {out}, plan::STREAM_D2H, {1});
  plan::Plan plan = b.finish();
  for (bool serial : {false, true}) {
    std::unique_ptr<Program> program = loadOrFail(plan);
    ASSERT_TRUE(program);
    auto executor = Executor::create(*program, {serial});
    ASSERT_TRUE(static_cast<bool>(executor));
    for (int step = 1; step <= 2; ++step) {
      std::string err = errorOf((*executor)->run(step, false));
      EXPECT_EQ(err.rfind("node 'adam' (AdamW): ", 0), 0u) << err;
    }
  }
}

} // namespace
