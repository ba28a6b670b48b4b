//===- CudaDescription.cpp - A GPU machine's description from its figures -===//
//
// The pure half of zinc-run --calibrate --backend=cuda: sizes to time,
// rates from timings, and the --hw description from the figures
// CudaCalibrate.cpp measured. No CUDA call here, so all of it is tested on
// machines without a device.
//
//===----------------------------------------------------------------------===//
#include "zinc/runtime/cuda/CudaCalibrate.h"
#include "zinc/support/Error.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include <algorithm>
#include <cmath>

namespace zinc::cuda {

namespace {

constexpr uint64_t MiB = uint64_t(1) << 20;
constexpr uint64_t GiB = uint64_t(1) << 30;

/// What CudaRuntime places in the arena beside the plan's GPU tier: per
/// kernel stream (compute, collective) a cuBLASLt workspace and kernel
/// scratch (CudaRuntimeOptions::scratchBytes), and the watermark's counter.
constexpr uint64_t kRuntimeArenaBytes = 2 * (32 * MiB + 64 * MiB) + MiB;

const GemmTiming *findGemm(const CudaFigures &f, llvm::StringRef precision) {
  for (const GemmTiming &g : f.gemms)
    if (g.precision == precision)
      return &g;
  return nullptr;
}

double gemmRate(const CudaFigures &f, llvm::StringRef precision) {
  const GemmTiming *g = findGemm(f, precision);
  return g ? rateOf(g->flops(), g->seconds) : 0;
}

std::string gemmSource(const CudaFigures &f, llvm::StringRef precision) {
  const GemmTiming *g = findGemm(f, precision);
  if (!g)
    return "not measured";
  return llvm::formatv("cuBLASLt {0} GEMM {1}x{2}x{3} (CublasLtGemm.h), median "
                       "of {4} runs: "
                       "{5:e3} FLOP/s",
                       g->precision, g->m, g->n, g->k, g->runs,
                       rateOf(g->flops(), g->seconds))
      .str();
}

} // namespace

int64_t squareGemmSize(unsigned elementBytes, uint64_t freeBytes) {
  int64_t n = elementBytes <= 2 ? 8192 : 4096;
  for (; n >= 256; n /= 2)
    if (3 * uint64_t(n) * uint64_t(n) * elementBytes <= freeBytes / 2)
      return n;
  return 0;
}

int timedRuns(double firstSeconds, double budgetSeconds, int minRuns,
              int maxRuns) {
  if (!(firstSeconds > 0) || !std::isfinite(firstSeconds))
    return maxRuns;
  double runs = std::floor(budgetSeconds / firstSeconds);
  return static_cast<int>(std::clamp(runs, double(minRuns), double(maxRuns)));
}

double medianSeconds(std::vector<double> seconds) {
  if (seconds.empty())
    return 0;
  std::nth_element(seconds.begin(), seconds.begin() + seconds.size() / 2,
                   seconds.end());
  return seconds[seconds.size() / 2];
}

double rateOf(double work, double seconds) {
  if (!(seconds > 0) || !std::isfinite(seconds) || !std::isfinite(work))
    return 0;
  return work / seconds;
}

uint64_t usableGpuBytes(uint64_t freeBytes) {
  uint64_t headroom = std::max(GiB, freeBytes / 50);
  uint64_t kept = kRuntimeArenaBytes + headroom;
  return freeBytes > kept ? freeBytes - kept : 0;
}

uint64_t usableHostBytes(uint64_t physicalBytes) {
  uint64_t kept = std::max(8 * GiB, physicalBytes / 8);
  return physicalBytes > kept ? physicalBytes - kept : 0;
}

uint64_t usableNvmeBytes(uint64_t availableBytes) {
  return availableBytes / 10 * 9;
}

llvm::Expected<Hardware> describeCudaMachine(const CudaFigures &f,
                                             const Hardware &host) {
  Hardware hw = host;
  hw.name = "calibrated-cuda";
  hw.gpuMem = usableGpuBytes(f.freeBytes);
  if (hw.gpuMem == 0)
    return makeError(
        "--calibrate: the device has " + std::to_string(f.freeBytes) +
        " bytes free, less than the cuda runtime keeps for itself");
  hw.cpuMem = usableHostBytes(f.hostPhysicalBytes);
  if (hw.cpuMem == 0)
    return makeError("--calibrate: the host has " +
                     std::to_string(f.hostPhysicalBytes) +
                     " bytes of memory, less than the system keeps");
  if (f.nvmeAvailableBytes)
    hw.nvmeMem = usableNvmeBytes(f.nvmeAvailableBytes);
  hw.gpusPerNode = static_cast<unsigned>(std::max(1, f.deviceCount));
  hw.gpusPerHostLink = 1;
  hw.gpuFlopsFp32 = gemmRate(f, "fp32");
  double bf16 = gemmRate(f, "bf16"), fp16 = gemmRate(f, "fp16");
  hw.gpuFlopsHalf =
      bf16 > 0 && fp16 > 0 ? std::min(bf16, fp16) : std::max(bf16, fp16);
  hw.gpuMemBandwidth = rateOf(2.0 * double(f.hbmCopyBytes), f.hbmCopySeconds);
  hw.hostToDeviceBandwidth = rateOf(double(f.hostCopyBytes), f.h2dSeconds);
  hw.deviceToHostBandwidth = rateOf(double(f.hostCopyBytes), f.d2hSeconds);
  // A stream of small kernels goes at the slower of the device's launches
  // and the executor's issuing of them.
  hw.kernelLaunchSeconds =
      std::max(f.emptyKernelSeconds, f.executorDispatchSeconds);
  double smallFlops = 2.0 * std::pow(double(f.smallGemmSize), 3);
  hw.gemmLaunchSeconds =
      hw.gpuFlopsHalf > 0
          ? std::max(0.0, f.smallGemmSeconds - smallFlops / hw.gpuFlopsHalf)
          : 0;
  hw.eventWaitSeconds = f.executorWaitSeconds;
  hw.copyEngines = true;
  hw.preemptionSeconds = 0;
  // Products and row kernels are priced by FLOPs and bytes at the rates
  // above, as in the GPU presets: the cpu backend's curves do not apply.
  hw.kernelTimes.clear();
  hw.productTimes.clear();
  for (auto [field, value] :
       {std::pair{"gpu_flops_fp32", hw.gpuFlopsFp32},
        std::pair{"gpu_flops_fp16", hw.gpuFlopsHalf},
        std::pair{"gpu_mem_bandwidth", hw.gpuMemBandwidth},
        std::pair{"h2d_bandwidth", hw.hostToDeviceBandwidth},
        std::pair{"d2h_bandwidth", hw.deviceToHostBandwidth},
        std::pair{"kernel_launch_seconds", hw.kernelLaunchSeconds},
        std::pair{"cpu_mem_bandwidth", hw.cpuMemBandwidth},
        std::pair{"cpu_adam_params_per_second", hw.cpuAdamParamsPerSecond},
        std::pair{"nvme_read_bandwidth", hw.nvmeReadBandwidth},
        std::pair{"nvme_write_bandwidth", hw.nvmeWriteBandwidth}})
    if (!std::isfinite(value) || !(value > 0))
      return makeError(llvm::Twine("--calibrate: the measurement of ") + field +
                       " gave no usable figure (" + std::to_string(value) +
                       ")");
  return hw;
}

std::string cudaDescriptionJson(const Hardware &hw, const CudaFigures &f) {
  // hardwareToJson is the one writer of the fields; the documentation is
  // added around them.
  auto parsed = llvm::json::parse(hardwareToJson(hw));
  llvm::json::Object o = parsed && parsed->getAsObject()
                             ? std::move(*parsed->getAsObject())
                             : llvm::json::Object{};
  o["description"] =
      llvm::formatv("{0}, measured by zinc-run --calibrate --backend=cuda",
                    f.deviceName.empty() ? "a CUDA device" : f.deviceName)
          .str();
  auto bytes = [](uint64_t n) {
    return llvm::formatv("{0:f2} GiB", double(n) / GiB).str();
  };
  llvm::json::Object sources{
      {"gpu_mem", "free device memory (" + bytes(f.freeBytes) + " of " +
                      bytes(f.totalBytes) +
                      ") less the cuda runtime's workspaces and scratch and a "
                      "2% headroom"},
      {"cpu_mem", "physical host memory (" + bytes(f.hostPhysicalBytes) +
                      ") less an eighth (at least 8 GiB) for the system"},
      {"gpu_flops_fp32", gemmSource(f, "fp32") +
                             " (strict f32, zinc's default; tf32 under "
                             "calibration.gemm)"},
      {"gpu_flops_fp16",
       gemmSource(f, "bf16") + "; " + gemmSource(f, "fp16") + "; the lower"},
      {"gpu_mem_bandwidth",
       llvm::formatv(
           "a device-to-device cudaMemcpyAsync of {0}, bytes read plus written",
           bytes(f.hbmCopyBytes))
           .str()},
      {"h2d_bandwidth",
       "cudaMemcpyAsync of " + bytes(f.hostCopyBytes) + " from pinned memory"},
      {"d2h_bandwidth",
       "cudaMemcpyAsync of " + bytes(f.hostCopyBytes) + " to pinned memory"},
      {"kernel_launch_seconds",
       "the larger of an empty kernel back to back and the executor "
       "running small Adds on the cuda backend, per instruction"},
      {"gemm_launch_seconds",
       llvm::formatv("a bf16 {0}^3 GEMM back to back, beyond its FLOPs at "
                     "gpu_flops_fp16",
                     f.smallGemmSize)
           .str()},
      {"event_wait_seconds",
       "the executor's compute and h2d streams taking turns on the cuda "
       "backend, beyond kernel_launch_seconds"},
      {"cpu_mem_bandwidth", "a STREAM triad over the OpenMP team"},
      {"cpu_adam_params_per_second",
       "the vectorised CPU AdamW on 16M parameters"},
      {"nvme_read_bandwidth", f.nvmeAvailableBytes
                                  ? "the NVMe tier under --nvme-dir (libaio, "
                                    "O_DIRECT), sequential"
                                  : "not measured: the cpu preset's"},
      {"nvme_write_bandwidth", f.nvmeAvailableBytes
                                   ? "as nvme_read_bandwidth"
                                   : "not measured: the cpu preset's"},
  };
  o["sources"] = std::move(sources);
  llvm::json::Array gemms;
  for (const GemmTiming &g : f.gemms)
    gemms.push_back(
        llvm::json::Object{{"precision", g.precision},
                           {"m", g.m},
                           {"n", g.n},
                           {"k", g.k},
                           {"runs", g.runs},
                           {"seconds", g.seconds},
                           {"flops_per_second", rateOf(g.flops(), g.seconds)}});
  o["calibration"] = llvm::json::Object{
      {"backend", "cuda"},
      {"device", f.deviceName},
      {"device_count", f.deviceCount},
      {"device_total_bytes", static_cast<int64_t>(f.totalBytes)},
      {"device_free_bytes", static_cast<int64_t>(f.freeBytes)},
      {"gemm", std::move(gemms)},
      {"hbm_copy_bytes", static_cast<int64_t>(f.hbmCopyBytes)},
      {"hbm_copy_seconds", f.hbmCopySeconds},
      {"host_copy_bytes", static_cast<int64_t>(f.hostCopyBytes)},
      {"h2d_seconds", f.h2dSeconds},
      {"d2h_seconds", f.d2hSeconds},
      {"empty_kernel_seconds", f.emptyKernelSeconds},
      {"small_gemm_size", f.smallGemmSize},
      {"small_gemm_seconds", f.smallGemmSeconds},
      {"executor_dispatch_seconds", f.executorDispatchSeconds},
      {"executor_wait_seconds", f.executorWaitSeconds},
      {"host_physical_bytes", static_cast<int64_t>(f.hostPhysicalBytes)},
      {"nvme_available_bytes", static_cast<int64_t>(f.nvmeAvailableBytes)},
  };
  return llvm::formatv("{0:2}", llvm::json::Value(std::move(o))).str();
}

} // namespace zinc::cuda
