//===- CudaCalibrateTest.cpp - zinc-run --calibrate --backend=cuda's logic ===//
//
// The pure half (CudaDescription.cpp) on every machine: the sizes timed,
// rates from timings, the capacities kept back, and the description, which
// must read back through --hw's parser with the same numbers. With no device,
// the measurement refuses in one line; with one, it measures.
//
//===----------------------------------------------------------------------===//
#include "zinc/runtime/cuda/CudaCalibrate.h"
#include "test/unit/cuda/DeviceTestSupport.h"
#include "zinc/support/Hardware.h"
#include "llvm/Support/JSON.h"
#include "gtest/gtest.h"

namespace zinc::cuda::test {
namespace {

constexpr uint64_t GiB = uint64_t(1) << 30;

/// What an H200 machine of the device tool might give (figures of the
/// size seen there, not a measurement).
CudaFigures h200Like() {
  CudaFigures f;
  f.deviceName = "NVIDIA H200";
  f.deviceCount = 1;
  f.totalBytes = 140 * GiB;
  f.freeBytes = 139 * GiB;
  // 2 n^3 FLOPs in the seconds that give about 51, 390, 790 and 757 TFLOP/s.
  f.gemms = {
      {"fp32", 4096, 4096, 4096, 2.0 * 4096.0 * 4096 * 4096 / 51e12, 20},
      {"tf32", 4096, 4096, 4096, 2.0 * 4096.0 * 4096 * 4096 / 390e12, 50},
      {"bf16", 8192, 8192, 8192, 2.0 * 8192.0 * 8192 * 8192 / 790e12, 50},
      {"fp16", 8192, 8192, 8192, 2.0 * 8192.0 * 8192 * 8192 / 757e12, 50}};
  f.hbmCopyBytes = 2 * GiB;
  f.hbmCopySeconds = 2.0 * 2 * GiB / 4.3e12;
  f.hostCopyBytes = GiB;
  f.h2dSeconds = GiB / 55e9;
  f.d2hSeconds = GiB / 54e9;
  f.emptyKernelSeconds = 2.5e-6;
  f.smallGemmSize = 256;
  f.smallGemmSeconds = 6e-6;
  f.executorDispatchSeconds = 4e-6;
  f.executorWaitSeconds = 3e-6;
  f.hostPhysicalBytes = 128 * GiB;
  f.nvmeAvailableBytes = 60 * GiB;
  return f;
}

/// The host part as measureHostSide leaves it.
Hardware hostPart() {
  auto hw = loadHardware("cpu");
  EXPECT_TRUE(bool(hw));
  hw->cpuMemBandwidth = 150e9;
  hw->cpuAdamParamsPerSecond = 3e9;
  hw->nvmeReadBandwidth = 6e9;
  hw->nvmeWriteBandwidth = 3e9;
  hw->nvmeReadLatencySeconds = 40e-6;
  hw->nvmeWriteLatencySeconds = 90e-6;
  // The cpu backend's curves, which a GPU's description must drop.
  hw->productTimes = {{1e6, 1e-5}, {2e6, 2e-5}};
  hw->kernelTimes["Gelu"] = {{16384, 1e-5}};
  return *hw;
}

TEST(CudaCalibrateMath,
     SquareGemmSizeHalvesUntilThreeMatricesTakeHalfTheFreeMemory) {
  EXPECT_EQ(squareGemmSize(2, 139 * GiB), 8192);
  EXPECT_EQ(squareGemmSize(4, 139 * GiB), 4096);
  // 3 x 8192^2 x 2 bytes = 384 MiB: needs 768 MiB free.
  EXPECT_EQ(squareGemmSize(2, 768ull << 20), 8192);
  EXPECT_EQ(squareGemmSize(2, (768ull << 20) - 1), 4096);
  EXPECT_EQ(squareGemmSize(4, 100ull << 20), 2048);
  EXPECT_EQ(squareGemmSize(4, 1ull << 20), 0);
}

TEST(CudaCalibrateMath, TimedRunsFillTheBudgetWithinBounds) {
  EXPECT_EQ(timedRuns(0.01, 0.25, 5, 50), 25);
  EXPECT_EQ(timedRuns(1.0, 0.25, 5, 50), 5);
  EXPECT_EQ(timedRuns(1e-6, 0.25, 5, 50), 50);
  EXPECT_EQ(timedRuns(0.0, 0.25, 5, 50), 50);
}

TEST(CudaCalibrateMath, MedianAndRates) {
  EXPECT_EQ(medianSeconds({3, 1, 2}), 2);
  EXPECT_EQ(medianSeconds({4, 1, 3, 2}), 3);
  EXPECT_EQ(medianSeconds({}), 0);
  EXPECT_DOUBLE_EQ(rateOf(10, 2), 5);
  EXPECT_EQ(rateOf(10, 0), 0);
  EXPECT_EQ(rateOf(10, -1), 0);
  EXPECT_EQ(rateOf(10, std::numeric_limits<double>::infinity()), 0);
}

TEST(CudaCalibrateMath, CapacitiesKeepWhatTheRuntimeAndSystemNeed) {
  // 2% of 139 GiB (2.78 GiB) and 193 MiB of workspaces and scratch.
  uint64_t gpu = usableGpuBytes(139 * GiB);
  EXPECT_EQ(gpu, 139 * GiB - 139 * GiB / 50 - (193ull << 20));
  // At least 1 GiB of headroom.
  EXPECT_EQ(usableGpuBytes(10 * GiB), 10 * GiB - GiB - (193ull << 20));
  EXPECT_EQ(usableGpuBytes(GiB), 0u);
  EXPECT_EQ(usableHostBytes(128 * GiB), 112 * GiB);
  EXPECT_EQ(usableHostBytes(32 * GiB), 24 * GiB);
  EXPECT_EQ(usableHostBytes(8 * GiB), 0u);
  EXPECT_EQ(usableNvmeBytes(60 * GiB), 54 * GiB);
}

TEST(CudaCalibrateDescription, DerivesRatesFromTimings) {
  auto hw = describeCudaMachine(h200Like(), hostPart());
  ASSERT_TRUE(bool(hw)) << llvm::toString(hw.takeError());
  EXPECT_EQ(hw->name, "calibrated-cuda");
  EXPECT_NEAR(hw->gpuFlopsFp32, 51e12, 1e6);
  // The lower of bf16 and fp16.
  EXPECT_NEAR(hw->gpuFlopsHalf, 757e12, 1e6);
  EXPECT_NEAR(hw->gpuMemBandwidth, 4.3e12, 1e3);
  EXPECT_NEAR(hw->hostToDeviceBandwidth, 55e9, 1);
  EXPECT_NEAR(hw->deviceToHostBandwidth, 54e9, 1);
  // The slower of the device's launches and the executor's issuing.
  EXPECT_DOUBLE_EQ(hw->kernelLaunchSeconds, 4e-6);
  EXPECT_NEAR(hw->gemmLaunchSeconds, 6e-6 - 2.0 * 256 * 256 * 256 / 757e12,
              1e-12);
  EXPECT_DOUBLE_EQ(hw->eventWaitSeconds, 3e-6);
  EXPECT_TRUE(hw->copyEngines);
  EXPECT_EQ(hw->preemptionSeconds, 0);
  EXPECT_TRUE(hw->productTimes.empty());
  EXPECT_TRUE(hw->kernelTimes.empty());
  EXPECT_EQ(hw->gpuMem, usableGpuBytes(139 * GiB));
  EXPECT_EQ(hw->cpuMem, 112 * GiB);
  EXPECT_EQ(hw->nvmeMem, 54 * GiB);
  EXPECT_EQ(hw->cpuAdamParamsPerSecond, 3e9);
  EXPECT_EQ(hw->nvmeWriteLatencySeconds, 90e-6);
}

TEST(CudaCalibrateDescription, WithoutNvmeDirKeepsThePresetsNvme) {
  CudaFigures f = h200Like();
  f.nvmeAvailableBytes = 0;
  auto hw = describeCudaMachine(f, hostPart());
  ASSERT_TRUE(bool(hw)) << llvm::toString(hw.takeError());
  auto cpu = loadHardware("cpu");
  ASSERT_TRUE(bool(cpu));
  EXPECT_EQ(hw->nvmeMem, cpu->nvmeMem);
}

TEST(CudaCalibrateDescription, RefusesAMissingOrBrokenFigureNamingIt) {
  CudaFigures f = h200Like();
  f.gemms.pop_back();
  f.gemms.pop_back(); // Neither bf16 nor fp16.
  auto hw = describeCudaMachine(f, hostPart());
  ASSERT_FALSE(bool(hw));
  EXPECT_EQ(llvm::toString(hw.takeError()),
            "--calibrate: the measurement of gpu_flops_fp16 gave no usable "
            "figure (0.000000)");
  f = h200Like();
  f.h2dSeconds = 0;
  hw = describeCudaMachine(f, hostPart());
  ASSERT_FALSE(bool(hw));
  EXPECT_NE(llvm::toString(hw.takeError()).find("h2d_bandwidth"),
            std::string::npos);
  f = h200Like();
  f.freeBytes = GiB / 2;
  hw = describeCudaMachine(f, hostPart());
  ASSERT_FALSE(bool(hw));
  EXPECT_NE(
      llvm::toString(hw.takeError()).find("less than the cuda runtime keeps"),
      std::string::npos);
}

TEST(CudaCalibrateDescription, JsonReadsBackThroughHwWithTheSameNumbers) {
  CudaFigures f = h200Like();
  auto hw = describeCudaMachine(f, hostPart());
  ASSERT_TRUE(bool(hw)) << llvm::toString(hw.takeError());
  std::string json = cudaDescriptionJson(*hw, f);
  auto back = parseHardwareJson(json, "hw.json");
  ASSERT_TRUE(bool(back)) << llvm::toString(back.takeError()) << "\n" << json;
  EXPECT_EQ(back->name, "calibrated-cuda");
  EXPECT_EQ(hardwareToJson(*back), hardwareToJson(*hw));
  // The documentation: the raw figures, each GEMM by precision.
  auto parsed = llvm::json::parse(json);
  ASSERT_TRUE(bool(parsed));
  const llvm::json::Object *calibration =
      parsed->getAsObject()->getObject("calibration");
  ASSERT_NE(calibration, nullptr);
  EXPECT_EQ(calibration->getString("backend"), llvm::StringRef("cuda"));
  EXPECT_EQ(calibration->getString("device"), llvm::StringRef("NVIDIA H200"));
  const llvm::json::Array *gemms = calibration->getArray("gemm");
  ASSERT_NE(gemms, nullptr);
  ASSERT_EQ(gemms->size(), 4u);
  EXPECT_EQ((*gemms)[1].getAsObject()->getString("precision"),
            llvm::StringRef("tf32"));
  EXPECT_NEAR(*(*gemms)[1].getAsObject()->getNumber("flops_per_second"), 390e12,
              1e6);
  const llvm::json::Object *sources =
      parsed->getAsObject()->getObject("sources");
  ASSERT_NE(sources, nullptr);
  EXPECT_TRUE(sources->getString("gpu_flops_fp16"));
}

TEST(CudaCalibrateDescription, AHandWrittenDescriptionOfThatShapeParses) {
  // The shape zinc-run --calibrate --backend=cuda writes, as a user might
  // keep it: the fields, then the documentation the parser skips.
  const char *text = R"({
  "name": "calibrated-cuda",
  "gpu_mem": 146028888064, "cpu_mem": 120259084288, "nvme_mem": 57982058496,
  "gpus_per_node": 1, "gpu_flops_fp32": 5.1e13, "gpu_flops_fp16": 7.57e14,
  "gpu_mem_bandwidth": 4.3e12, "kernel_launch_seconds": 4e-06,
  "gemm_launch_seconds": 5.9e-06, "event_wait_seconds": 3e-06, "copy_engines": true,
  "preemption_seconds": 0, "h2d_bandwidth": 5.5e10, "d2h_bandwidth": 5.4e10,
  "gpus_per_host_link": 1, "cpu_mem_bandwidth": 1.5e11,
  "cpu_adam_params_per_second": 3e9, "nvme_read_bandwidth": 6e9,
  "nvme_write_bandwidth": 3e9, "nvme_read_latency_seconds": 4e-05,
  "nvme_write_latency_seconds": 9e-05, "intra_node_bandwidth": 5e9,
  "intra_node_latency": 2e-05, "inter_node_bandwidth": 1e9, "inter_node_latency": 5e-05,
  "description": "NVIDIA H200, measured by zinc-run --calibrate --backend=cuda",
  "sources": {"gpu_flops_fp32": "cuBLASLt fp32 GEMM 4096x4096x4096"},
  "calibration": {"backend": "cuda", "gemm": [{"precision": "bf16", "m": 8192,
                  "n": 8192, "k": 8192, "seconds": 0.0014, "flops_per_second": 7.9e14}]}
})";
  auto hw = parseHardwareJson(text, "h200.json");
  ASSERT_TRUE(bool(hw)) << llvm::toString(hw.takeError());
  EXPECT_EQ(hw->gpuMem, 146028888064u);
  EXPECT_EQ(hw->gpuFlopsHalf, 7.57e14);
  EXPECT_TRUE(hw->copyEngines);
}

TEST(CudaCalibrateDevice, RefusesWithoutADeviceInOneLine) {
  std::string why;
  if (deviceAvailable(why))
    GTEST_SKIP() << "a device is present: the measurement runs instead";
  rt::CalibrateOptions options;
  auto figures = measureCudaDevice(options);
  ASSERT_FALSE(bool(figures));
  std::string message = llvm::toString(figures.takeError());
  EXPECT_EQ(message.find('\n'), std::string::npos);
  EXPECT_NE(message.find("--calibrate --backend=cuda"), std::string::npos)
      << message;
}

TEST(CudaCalibrateDevice, MeasuresTheDevice) {
  std::string why;
  if (!deviceAvailable(why))
    GTEST_SKIP() << why;
  rt::CalibrateOptions options;
  auto figures = measureCudaDevice(options);
  ASSERT_TRUE(bool(figures)) << llvm::toString(figures.takeError());
  ASSERT_EQ(figures->gemms.size(), 4u);
  for (const GemmTiming &g : figures->gemms)
    EXPECT_GT(rateOf(g.flops(), g.seconds), 1e12) << g.precision;
  auto hw = describeCudaMachine(*figures, hostPart());
  ASSERT_TRUE(bool(hw)) << llvm::toString(hw.takeError());
  EXPECT_GT(hw->gpuMemBandwidth, 1e11);
}

} // namespace
} // namespace zinc::cuda::test
