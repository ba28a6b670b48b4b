//===- Calibrate.cpp - Measuring this machine into a hardware description -===//
#include "zinc/runtime/Calibrate.h"
#include "zinc/plan/PlanBuilder.h"
#include "zinc/runtime/Executor.h"
#include "zinc/runtime/Program.h"
#include "runtime/cpu/kernels/TeamGemm.h"
#include "zinc/runtime/optim/CpuAdam.h"
#include "zinc/runtime/storage/AlignedBuffer.h"
#include "zinc/runtime/storage/NvmeTier.h"
#include "zinc/support/Error.h"
#include "llvm/Support/FormatVariadic.h"
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

namespace zinc::rt {

namespace {

using Clock = std::chrono::steady_clock;

/// The median of `values` (the upper one of an even count).
double medianOf(std::vector<double> values) {
  std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
  return values[values.size() / 2];
}

/// The shortest timing of `body` over at least `runs` runs and `seconds`
/// of running, after one warm-up run. A neighbour on a shared VM can slow
/// every run of a short burst (one calibration saw a 1024^3 GEMM at half
/// its rate in all three of its runs); a longer window outlasts it.
template <typename F> double bestSeconds(int runs, double seconds, F body) {
  body();
  double best = 1e30;
  auto begin = Clock::now();
  for (int i = 0;
       i < runs || std::chrono::duration<double>(Clock::now() - begin).count() < seconds; ++i) {
    auto start = Clock::now();
    body();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count());
  }
  return best;
}

double gemmFlops(bool team) {
  const int64_t n = 1024;
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n, 0.0f);
  auto g = cpu::GemmArgs<float>::make(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n,
                                      0.0f, c.data(), n);
  double s = bestSeconds(3, 0.4, [&] { team ? cpu::teamGemm(g) : cpu::gemmOnThisThread(g); });
  return 2.0 * n * n * n / s;
}

double triadBandwidth() {
  const int64_t n = 16 << 20; // 64 MiB a array
  std::vector<float> a(n), b(n, 1.0f), c(n, 2.0f);
  float scalar = 3.0f;
  double s = bestSeconds(5, 0.25, [&] {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i)
      a[i] = b[i] + scalar * c[i];
  });
  return 3.0 * n * sizeof(float) / s;
}

double copyBandwidth() {
  const size_t bytes = 64 << 20;
  std::vector<uint8_t> src(bytes, 1), dst(bytes, 0);
  uint64_t seen = 0;
  double s = bestSeconds(5, 0.25, [&] {
    std::memcpy(dst.data(), src.data(), bytes);
    // Read back, so the copy is observable and cannot be elided.
    seen += dst[bytes / 2];
  });
  return seen ? bytes / s : 0;
}

double adamRate() {
  const int64_t n = 16 << 20;
  std::vector<float> p(n, 1.0f), m(n, 0.0f), v(n, 0.0f), g(n, 0.01f);
  optim::AdamBuffers buffers;
  buffers.param = p.data();
  buffers.expAvg = m.data();
  buffers.expAvgSq = v.data();
  buffers.grad = g.data();
  optim::AdamConstants constants =
      optim::makeAdamConstants(true, 1e-3, 0.9, 0.999, 1e-8, 0.01, 1, nullptr);
  double s = bestSeconds(3, 0.25, [&] { optim::cpuAdam(constants, buffers, n); });
  return n / s;
}

/// The median seconds of a step of `p` after a warm-up one, over 7 steps
/// and at least `window` seconds of them: a step of a few hundred
/// microseconds is shorter than a neighbour's hiccup on a shared VM, so
/// short plans run more steps.
llvm::Expected<double> stepSeconds(plan::Plan p, double window = 0,
                                   const DeviceHooksFactory &device = {}) {
  auto program = Program::fromPlan(std::move(p));
  if (!program)
    return program.takeError();
  std::unique_ptr<ExecutionHooks> hooks;
  if (device) {
    auto made = device(**program);
    if (!made)
      return made.takeError();
    hooks = std::move(*made);
    if (auto err = hooks->stateToDevice())
      return err;
  }
  ExecutorOptions options;
  options.hooks = hooks.get();
  auto executor = Executor::create(**program, options);
  if (!executor)
    return executor.takeError();
  std::vector<double> times;
  double total = 0;
  for (int step = 1; step <= 8 || (total < window && step <= 4096); ++step) {
    auto result = (*executor)->run(step, /*recordTimings=*/false);
    if (!result)
      return result.takeError();
    if (step > 1) {
      times.push_back(result->seconds);
      total += result->seconds;
    }
  }
  return medianOf(std::move(times));
}

} // namespace

llvm::Expected<ExecutorCosts> measureExecutorCosts(const DeviceHooksFactory &device) {
  const unsigned pairs = 200;
  auto inputs = [](plan::PlanBuilder &b) {
    return std::pair{b.tensor("a", {16}, plan::TIER_GPU, 1, plan::ROLE_INPUT),
                     b.tensor("b", {16}, plan::TIER_GPU, 1, plan::ROLE_INPUT)};
  };
  plan::PlanBuilder straight;
  auto [a, b] = inputs(straight);
  int c = straight.tensor("c", {16});
  for (unsigned i = 0; i < 2 * pairs; ++i)
    straight.add("add" + std::to_string(i), "Add", {a, b}, {c});
  plan::PlanBuilder chain;
  auto [x, y] = inputs(chain);
  int z = chain.tensor("z", {16});
  int host = chain.tensor("host", {16}, plan::TIER_CPU, 1, plan::ROLE_INPUT);
  int fetched = chain.tensor("fetched", {16});
  for (unsigned i = 0; i < pairs; ++i) {
    plan::Instruction &add = chain.add("add" + std::to_string(i), "Add", {x, y}, {z},
                                       plan::STREAM_COMPUTE, {}, {2 * i});
    if (i > 0)
      add.add_wait_events(2 * i - 1);
    chain.add("copy" + std::to_string(i), "Copy", {host}, {fetched}, plan::STREAM_H2D,
              {2 * i}, {2 * i + 1});
  }
  // A wake-up on this kind of VM swings from a few to a hundred
  // microseconds between runs: the median of five runs of each plan.
  auto median = [&](plan::Plan p) -> llvm::Expected<double> {
    std::vector<double> runs;
    for (int i = 0; i < 5; ++i) {
      auto s = stepSeconds(p, 0, device);
      if (!s)
        return s.takeError();
      runs.push_back(*s);
    }
    return medianOf(std::move(runs));
  };
  auto alone = median(straight.finish());
  if (!alone)
    return alone.takeError();
  auto turns = median(chain.finish());
  if (!turns)
    return turns.takeError();
  ExecutorCosts costs;
  costs.dispatch = *alone / (2 * pairs);
  costs.wait = std::max(0.0, *turns / (2 * pairs) - costs.dispatch);
  return costs;
}

namespace {

/// What compute loses each time an instruction of another stream runs on
/// its cores, beyond that instruction's own time: a plan of team products
/// alone against the same with a tiny h2d copy woken by each product,
/// which compute never waits for. Runs of the two alternate, so drift hits
/// both alike; the median of nine paired differences.
llvm::Expected<double> preemptionSeconds() {
  const unsigned products = 100;
  auto build = [&](bool copies) {
    plan::PlanBuilder b;
    int a = b.tensor("a", {128, 256}, plan::TIER_GPU, 1, plan::ROLE_INPUT);
    int w = b.tensor("w", {256, 256}, plan::TIER_GPU, 1, plan::ROLE_INPUT);
    int c = b.tensor("c", {128, 256});
    int host = b.tensor("host", {16}, plan::TIER_CPU, 1, plan::ROLE_INPUT);
    int fetched = b.tensor("fetched", {16});
    for (unsigned i = 0; i < products; ++i) {
      plan::Instruction &product = b.add("product" + std::to_string(i), "MatMul", {a, w}, {c});
      if (!copies)
        continue;
      product.add_signal_events(i);
      b.add("copy" + std::to_string(i), "Copy", {host}, {fetched}, plan::STREAM_H2D, {i}, {});
    }
    return b.finish();
  };
  plan::Plan alone = build(false), beside = build(true);
  std::vector<double> differences;
  for (int i = 0; i < 9; ++i) {
    auto a = stepSeconds(alone);
    if (!a)
      return a.takeError();
    auto b = stepSeconds(beside);
    if (!b)
      return b.takeError();
    differences.push_back(*b - *a);
  }
  return std::max(0.0, medianOf(std::move(differences)) / products);
}

/// What one executor MatMul of [m, k] x [k, n] takes beyond the dispatch
/// (through the kernel's operand checks, geometry and team split): a plan
/// of back-to-back instances, about 20 MFLOP of them at least, stepped for
/// 0.15 s.
llvm::Expected<double> productSeconds(int64_t m, int64_t k, int64_t n, double dispatch) {
  double flops = 2.0 * m * k * n;
  const unsigned instances =
      static_cast<unsigned>(std::clamp(2e7 / flops, 4.0, 64.0));
  plan::PlanBuilder b;
  int a = b.tensor("a", {m, k}, plan::TIER_GPU, 1, plan::ROLE_INPUT);
  int w = b.tensor("w", {k, n}, plan::TIER_GPU, 1, plan::ROLE_INPUT);
  int c = b.tensor("c", {m, n});
  for (unsigned i = 0; i < instances; ++i)
    b.add("product" + std::to_string(i), "MatMul", {a, w}, {c});
  auto step = stepSeconds(b.finish(), /*window=*/0.15);
  if (!step)
    return step.takeError();
  return std::max(0.0, *step / instances - dispatch);
}

/// The products the cost model prices by measurement (product_seconds):
/// from the bundled example's [128, 64] x [64, 64] up to 512^3, where the
/// team GEMM nears the rate of gpu_flops_fp32. Between them a product's
/// rate climbs from a few tenths of that; below the first, the fixed cost
/// (gemm_launch_seconds) dominates.
llvm::Error measureProducts(Hardware &hw) {
  const int64_t shapes[][3] = {
      {128, 64, 64}, {128, 64, 256}, {128, 256, 256}, {256, 256, 256}, {512, 256, 512},
      {512, 512, 512}};
  hw.productTimes.clear();
  for (const auto &[m, k, n] : shapes) {
    auto s = productSeconds(m, k, n, hw.kernelLaunchSeconds);
    if (!s)
      return addContext(s.takeError(), "--calibrate: timing products");
    double flops = 2.0 * m * k * n;
    // Keep the points a function of FLOPs that never speeds up with size
    // beyond what noise allows: a time below the previous one is noise.
    double seconds = hw.productTimes.empty() ? *s : std::max(*s, hw.productTimes.back().second);
    hw.productTimes.emplace_back(flops, seconds);
  }
  // The fixed cost: the smallest product beyond its FLOPs at the peak rate.
  const auto &[flops, seconds] = hw.productTimes.front();
  hw.gemmLaunchSeconds = std::max(0.0, seconds - flops / hw.gpuFlopsFp32);
  return llvm::Error::success();
}

/// One kernel the cost model times instead of pricing its FLOPs: how to
/// build an instance over x = [rows, d].
struct TimedKernel {
  /// The operands after x.
  enum class Operand { LikeX, Scale /* [d] */, Mask /* bool [rows, d] */ };
  const char *op;
  bool zincDomain;
  std::vector<Operand> extraInputs;
  unsigned outputs;
  std::vector<std::pair<const char *, int64_t>> intAttrs;
};

const std::vector<TimedKernel> &timedKernels() {
  using O = TimedKernel::Operand;
  static const std::vector<TimedKernel> kernels = {
      {"Gelu", false, {}, 1, {}},
      {"GeluGrad", true, {O::LikeX}, 1, {}},
      {"Softmax", false, {}, 1, {{"axis", -1}}},
      {"MaskedSoftmax", true, {O::Mask}, 1, {}},
      {"SoftmaxGrad", true, {O::LikeX}, 1, {{"axis", -1}}},
      {"LayerNormalization", false, {O::Scale, O::Scale}, 1, {{"axis", -1}}},
      {"LayerNormalizationGrad", true, {O::LikeX, O::Scale}, 3, {{"axis", -1}}},
  };
  return kernels;
}

/// The seconds one `k` over [rows, d] takes beyond `dispatch`: a plan of
/// back-to-back instances through the executor.
llvm::Expected<double> kernelSeconds(const TimedKernel &k, int64_t rows, int64_t d,
                                     double dispatch) {
  const unsigned instances = 24;
  plan::PlanBuilder b;
  b.workspace(plan::STREAM_COMPUTE, 1 << 20); // Row statistics, LayerNorm's Scale.
  int x = b.tensor("x", {rows, d}, plan::TIER_GPU, 1, plan::ROLE_INPUT);
  std::vector<int> inputs = {x};
  for (TimedKernel::Operand operand : k.extraInputs) {
    std::string name = "in" + std::to_string(inputs.size());
    switch (operand) {
    case TimedKernel::Operand::LikeX:
      inputs.push_back(b.tensor(name, {rows, d}, plan::TIER_GPU, 1, plan::ROLE_INPUT));
      break;
    case TimedKernel::Operand::Scale:
      inputs.push_back(b.tensor(name, {d}, plan::TIER_GPU, 1, plan::ROLE_INPUT));
      break;
    case TimedKernel::Operand::Mask:
      inputs.push_back(b.tensor(name, {rows, d}, plan::TIER_GPU, 9 /* BOOL */, plan::ROLE_INPUT));
      break;
    }
  }
  std::vector<int> outputs;
  for (unsigned i = 0; i < k.outputs; ++i)
    outputs.push_back(i == 0 ? b.tensor("y", {rows, d}) : b.tensor("y" + std::to_string(i), {d}));
  for (unsigned i = 0; i < instances; ++i) {
    plan::Instruction &inst = b.add(std::string(k.op) + std::to_string(i), k.op, {}, {});
    for (int id : inputs)
      inst.add_inputs(id);
    for (int id : outputs)
      inst.add_outputs(id);
    if (k.zincDomain)
      inst.set_domain("zinc");
    for (const auto &[name, value] : k.intAttrs) {
      plan::Attribute *a = inst.add_attrs();
      a->set_name(name);
      a->set_kind(plan::ATTR_INT);
      a->set_i(value);
    }
  }
  auto step = stepSeconds(b.finish());
  if (!step)
    return step.takeError();
  return std::max(0.0, *step / instances - dispatch);
}

/// Each timed kernel at two sizes: 16Ki elements in rows of 64 (run on
/// one thread) and 256Ki in rows of 256 (on the team).
llvm::Error measureKernels(Hardware &hw) {
  hw.kernelTimes.clear();
  for (const TimedKernel &k : timedKernels()) {
    KernelTimePoints points;
    for (auto [rows, d] : {std::pair<int64_t, int64_t>{256, 64}, {1024, 256}}) {
      auto s = kernelSeconds(k, rows, d, hw.kernelLaunchSeconds);
      if (!s)
        return addContext(s.takeError(), llvm::Twine("--calibrate: timing ") + k.op);
      points.emplace_back(static_cast<double>(rows * d), *s);
    }
    hw.kernelTimes[k.op] = std::move(points);
  }
  return llvm::Error::success();
}

llvm::Error measureNvme(const CalibrateOptions &o, Hardware &hw) {
  storage::NvmeTierOptions options;
  options.dir = o.nvmeDir;
  options.capacityBytes = o.nvmeBytes;
  options.blockBytes = o.nvmeBlockBytes;
  options.queueDepth = o.nvmeQueueDepth;
  options.warn = [&](llvm::StringRef msg) {
    if (o.progress)
      o.progress(("NVMe: " + msg).str());
  };
  auto tier = storage::NvmeTier::create(options);
  if (!tier)
    return addContext(tier.takeError(), "--calibrate: the NVMe measurement");
  auto buffer = storage::AlignedBuffer::allocate(o.nvmeBytes);
  if (!buffer)
    return buffer.takeError();
  std::memset(buffer->data(), 0x5a, o.nvmeBytes);
  auto pass = [&](storage::IoKind kind) -> llvm::Expected<double> {
    auto start = Clock::now();
    if (auto err = (*tier)->transfer({kind, 0, buffer->data(), o.nvmeBytes}))
      return err;
    return std::chrono::duration<double>(Clock::now() - start).count();
  };
  // The first write of a preallocated extent converts it in the journal;
  // training overwrites, so the timed passes follow a warm-up write.
  double write = 1e30, read = 1e30;
  for (int i = 0; i < 4; ++i) {
    auto w = pass(storage::IoKind::Write);
    if (!w)
      return w.takeError();
    auto r = pass(storage::IoKind::Read);
    if (!r)
      return r.takeError();
    if (i > 0) {
      write = std::min(write, *w);
      read = std::min(read, *r);
    }
  }
  hw.nvmeWriteBandwidth = o.nvmeBytes / write;
  hw.nvmeReadBandwidth = o.nvmeBytes / read;
  // A lone request of one block, the device otherwise idle: what it takes
  // beyond its bytes at the sequential rate is the latency a queue hides.
  // The median of nine, at offsets spread over the file.
  const uint64_t lone = std::min<uint64_t>(o.nvmeBlockBytes, o.nvmeBytes);
  auto latency = [&](storage::IoKind kind, double bandwidth) -> llvm::Expected<double> {
    std::vector<double> times;
    for (uint64_t i = 0; i < 9; ++i) {
      uint64_t offset = std::min((i * 7 % 9) * (o.nvmeBytes / 9), o.nvmeBytes - lone) / lone * lone;
      auto start = Clock::now();
      if (auto err = (*tier)->transfer({kind, offset, buffer->data(), lone}))
        return err;
      times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
      // Let the device settle, so the next request finds it idle.
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return std::max(0.0, medianOf(std::move(times)) - lone / bandwidth);
  };
  auto writeLatency = latency(storage::IoKind::Write, hw.nvmeWriteBandwidth);
  if (!writeLatency)
    return writeLatency.takeError();
  auto readLatency = latency(storage::IoKind::Read, hw.nvmeReadBandwidth);
  if (!readLatency)
    return readLatency.takeError();
  hw.nvmeWriteLatencySeconds = *writeLatency;
  hw.nvmeReadLatencySeconds = *readLatency;
  return llvm::Error::success();
}

/// The NVMe fields under o.nvmeDir, each said; nothing without one.
llvm::Error measureNvmeTier(const CalibrateOptions &o, Hardware &hw) {
  if (o.nvmeDir.empty()) {
    if (o.progress)
      o.progress("NVMe not measured (no --nvme-dir): its rates stay the cpu preset's");
    return llvm::Error::success();
  }
  if (auto err = measureNvme(o, hw))
    return err;
  if (o.progress) {
    auto say = [&](const char *field, double value, const char *unit) {
      o.progress(llvm::formatv("{0} = {1:e3} {2}", field, value, unit).str());
    };
    say("nvme_read_bandwidth", hw.nvmeReadBandwidth, "bytes/s (the NVMe tier, sequential)");
    say("nvme_write_bandwidth", hw.nvmeWriteBandwidth, "bytes/s (the NVMe tier, sequential)");
    say("nvme_read_latency_seconds", hw.nvmeReadLatencySeconds,
        "s (a lone 1-block read beyond its bytes at the sequential rate)");
    say("nvme_write_latency_seconds", hw.nvmeWriteLatencySeconds,
        "s (a lone 1-block write beyond its bytes at the sequential rate)");
  }
  return llvm::Error::success();
}

} // namespace

llvm::Error measureHostSide(const CalibrateOptions &o, Hardware &hw) {
  auto say = [&](const char *field, double value, const char *unit) {
    if (o.progress)
      o.progress(llvm::formatv("{0} = {1:e3} {2}", field, value, unit).str());
  };
  hw.cpuMemBandwidth = triadBandwidth();
  say("cpu_mem_bandwidth", hw.cpuMemBandwidth, "bytes/s (triad)");
  hw.cpuAdamParamsPerSecond = adamRate();
  say("cpu_adam_params_per_second", hw.cpuAdamParamsPerSecond, "1/s (AdamW, 16M parameters)");
  return measureNvmeTier(o, hw);
}

llvm::Expected<Hardware> calibrateThisMachine(const CalibrateOptions &o) {
  auto base = loadHardware("cpu");
  if (!base)
    return base.takeError();
  Hardware hw = *base;
  hw.name = "calibrated";
  auto say = [&](const char *field, double value, const char *unit) {
    if (o.progress)
      o.progress(llvm::formatv("{0} = {1:e3} {2}", field, value, unit).str());
  };
  hw.gpuFlopsFp32 = gemmFlops(/*team=*/true);
  say("gpu_flops_fp32", hw.gpuFlopsFp32, "FLOP/s (fp32 GEMM 1024^3, OpenMP team)");
  hw.gpuFlopsHalf = gemmFlops(/*team=*/false);
  say("gpu_flops_fp16", hw.gpuFlopsHalf, "FLOP/s (the same GEMM on one thread)");
  hw.gpuMemBandwidth = hw.cpuMemBandwidth = triadBandwidth();
  say("gpu_mem_bandwidth, cpu_mem_bandwidth", hw.cpuMemBandwidth, "bytes/s (triad)");
  hw.hostToDeviceBandwidth = hw.deviceToHostBandwidth = copyBandwidth();
  say("h2d_bandwidth, d2h_bandwidth", hw.hostToDeviceBandwidth, "bytes/s (memcpy 64 MiB)");
  hw.cpuAdamParamsPerSecond = adamRate();
  say("cpu_adam_params_per_second", hw.cpuAdamParamsPerSecond, "1/s (AdamW, 16M parameters)");
  auto executor = measureExecutorCosts();
  if (!executor)
    return addContext(executor.takeError(), "--calibrate: timing the executor");
  hw.kernelLaunchSeconds = executor->dispatch;
  say("kernel_launch_seconds", hw.kernelLaunchSeconds,
      "s (the executor running small kernels back to back)");
  if (auto err = measureProducts(hw))
    return err;
  say("gemm_launch_seconds", hw.gemmLaunchSeconds,
      "s (the executor's [128,64]x[64,64] MatMul beyond dispatch and FLOPs)");
  for (const auto &[flops, seconds] : hw.productTimes)
    say(llvm::formatv("product_seconds at {0:e2} FLOPs", flops).str().c_str(), flops / seconds,
        "FLOP/s (the executor's MatMul)");
  hw.eventWaitSeconds = executor->wait;
  auto preemption = preemptionSeconds();
  if (!preemption)
    return addContext(preemption.takeError(), "--calibrate: timing preemption");
  hw.preemptionSeconds = *preemption;
  say("event_wait_seconds", hw.eventWaitSeconds,
      "s (the executor's compute and h2d streams taking turns, beyond dispatch)");
  say("preemption_seconds", hw.preemptionSeconds,
      "s (what team products lose to each tiny h2d copy woken beside them)");
  if (auto err = measureKernels(hw))
    return err;
  for (const auto &[op, points] : hw.kernelTimes)
    say(("kernel_seconds." + op).c_str(), points.back().second / points.back().first,
        "s per element (16Ki and 256Ki elements measured)");
  if (auto err = measureNvmeTier(o, hw))
    return err;
  // A description --hw refuses is no use: say which measurement failed.
  for (auto [field, value] :
       {std::pair{"gpu_flops_fp32", hw.gpuFlopsFp32}, std::pair{"gpu_flops_fp16", hw.gpuFlopsHalf},
        std::pair{"gpu_mem_bandwidth", hw.gpuMemBandwidth},
        std::pair{"h2d_bandwidth", hw.hostToDeviceBandwidth},
        std::pair{"cpu_adam_params_per_second", hw.cpuAdamParamsPerSecond},
        std::pair{"nvme_read_bandwidth", hw.nvmeReadBandwidth},
        std::pair{"nvme_write_bandwidth", hw.nvmeWriteBandwidth}})
    if (!std::isfinite(value) || !(value > 0))
      return makeError(llvm::Twine("--calibrate: the measurement of ") + field +
                       " gave no usable figure (" + std::to_string(value) + ")");
  return hw;
}

} // namespace zinc::rt
