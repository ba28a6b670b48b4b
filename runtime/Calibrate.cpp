//===- Calibrate.cpp - Measuring this machine into a hardware description -===//
#include "zinc/runtime/Calibrate.h"
#include "runtime/cpu/kernels/TeamGemm.h"
#include "zinc/runtime/optim/CpuAdam.h"
#include "zinc/runtime/storage/AlignedBuffer.h"
#include "zinc/runtime/storage/NvmeTier.h"
#include "zinc/support/Error.h"
#include "llvm/Support/FormatVariadic.h"
#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

namespace zinc::rt {

namespace {

using Clock = std::chrono::steady_clock;

/// The shortest of `runs` timings of `body`, after one warm-up run.
template <typename F> double bestSeconds(int runs, F body) {
  body();
  double best = 1e30;
  for (int i = 0; i < runs; ++i) {
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
  double s = bestSeconds(3, [&] { team ? cpu::teamGemm(g) : cpu::gemmOnThisThread(g); });
  return 2.0 * n * n * n / s;
}

double triadBandwidth() {
  const int64_t n = 16 << 20; // 64 MiB a array
  std::vector<float> a(n), b(n, 1.0f), c(n, 2.0f);
  float scalar = 3.0f;
  double s = bestSeconds(5, [&] {
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
  double s = bestSeconds(5, [&] {
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
  double s = bestSeconds(3, [&] { optim::cpuAdam(constants, buffers, n); });
  return n / s;
}

/// Seconds of one handoff between two threads through a mutex and a
/// condition variable: what one stream pays to wait on another's event.
double handoffSeconds() {
  std::mutex mu;
  std::condition_variable cv;
  int turn = 0;
  const int rounds = 2000;
  auto start = Clock::now();
  std::thread other([&] {
    for (int i = 0; i < rounds; ++i) {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return turn == 1; });
      turn = 0;
      cv.notify_all();
    }
  });
  for (int i = 0; i < rounds; ++i) {
    std::unique_lock<std::mutex> lock(mu);
    turn = 1;
    cv.notify_all();
    cv.wait(lock, [&] { return turn == 0; });
  }
  other.join();
  return std::chrono::duration<double>(Clock::now() - start).count() / (2.0 * rounds);
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
  return llvm::Error::success();
}

} // namespace

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
  hw.kernelLaunchSeconds = handoffSeconds();
  say("kernel_launch_seconds", hw.kernelLaunchSeconds, "s (a handoff between two threads)");
  if (!o.nvmeDir.empty()) {
    if (auto err = measureNvme(o, hw))
      return err;
    say("nvme_read_bandwidth", hw.nvmeReadBandwidth, "bytes/s (the NVMe tier, sequential)");
    say("nvme_write_bandwidth", hw.nvmeWriteBandwidth, "bytes/s (the NVMe tier, sequential)");
  } else if (o.progress) {
    o.progress("NVMe not measured (no --nvme-dir): its rates stay the cpu preset's");
  }
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
