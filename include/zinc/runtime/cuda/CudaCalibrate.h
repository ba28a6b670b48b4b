//===- CudaCalibrate.h - A GPU machine measured into a --hw description ---===//
//
// zinc-run --calibrate --backend=cuda > hw.json: what the cuda backend
// achieves on this machine's GPU, as a description zinc-compile --hw takes.
// The device side (runtime/cuda/CudaCalibrate.cpp):
//   gpu_flops_fp32        cuBLASLt strict-f32 GEMM through the project's
//                         wrapper (CublasLtGemm.h); tf32, bf16 and fp16 are
//                         measured too and kept under "calibration"
//   gpu_flops_fp16        the lower of the bf16 and fp16 GEMM rates (the cost
//                         model has one 16-bit rate)
//   gpu_mem_bandwidth     a device-to-device cudaMemcpyAsync, bytes read plus
//                         bytes written
//   h2d/d2h_bandwidth     cudaMemcpyAsync to and from pinned host memory
//   kernel_launch_...     the larger of an empty kernel back to back and the
//                         executor running small Adds on the cuda backend
//   gemm_launch_...       a small bf16 GEMM back to back beyond its FLOPs
//   event_wait_...        the executor's compute and h2d streams taking turns
//   gpu_mem               free device memory less the runtime's own arena
//                         (workspaces, scratch) and a headroom
// and the host's (runtime/Calibrate.cpp's measureHostSide): memory
// bandwidth, CPU Adam, and the NVMe tier under --nvme-dir. The pure parts
// (picking sizes, rates from timings, the description) live in
// CudaDescription.cpp so that they are tested without a device.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_CUDA_CUDACALIBRATE_H
#define ZINC_RUNTIME_CUDA_CUDACALIBRATE_H

#include "zinc/runtime/Calibrate.h"
#include "zinc/support/Hardware.h"
#include "llvm/Support/Error.h"
#include <cstdint>
#include <string>
#include <vector>

namespace zinc::cuda {

/// One GEMM timed: C[m,n] = A[m,k] B[k,n] in `precision` ("fp32", "tf32",
/// "bf16", "fp16"), its median seconds over `runs` timed runs.
struct GemmTiming {
  std::string precision;
  int64_t m = 0, n = 0, k = 0;
  double seconds = 0;
  int runs = 0;
  double flops() const { return 2.0 * double(m) * double(n) * double(k); }
};

/// Everything the device measurement found, as plain numbers, so that the
/// description is a pure function of them.
struct CudaFigures {
  std::string deviceName;
  int deviceCount = 1;
  /// Device memory after the context was made (cudaMemGetInfo).
  uint64_t totalBytes = 0;
  uint64_t freeBytes = 0;
  std::vector<GemmTiming> gemms;
  /// A device-to-device copy of `hbmCopyBytes`: median seconds.
  uint64_t hbmCopyBytes = 0;
  double hbmCopySeconds = 0;
  /// Copies of `hostCopyBytes` between pinned host memory and the device.
  uint64_t hostCopyBytes = 0;
  double h2dSeconds = 0;
  double d2hSeconds = 0;
  /// An empty kernel, median seconds per launch over a burst.
  double emptyKernelSeconds = 0;
  /// A small GEMM back to back: its shape (bf16) and median seconds per call.
  int64_t smallGemmSize = 0;
  double smallGemmSeconds = 0;
  /// The executor on the cuda backend (rt::measureExecutorCosts).
  double executorDispatchSeconds = 0;
  double executorWaitSeconds = 0;
  /// The host's physical memory and, with --nvme-dir, its free space there.
  uint64_t hostPhysicalBytes = 0;
  uint64_t nvmeAvailableBytes = 0;
};

/// The side of the square GEMM timed in a precision of `elementBytes`: the
/// preferred one (8192 for 16-bit types, 4096 for 32-bit, where strict f32
/// already takes milliseconds), halved until A, B and C take at most half
/// of `freeBytes`; 0 when not even 256 fits.
int64_t squareGemmSize(unsigned elementBytes, uint64_t freeBytes);

/// Timed repetitions for a measurement whose first run took `firstSeconds`:
/// enough to fill `budgetSeconds`, within [minRuns, maxRuns].
int timedRuns(double firstSeconds, double budgetSeconds, int minRuns,
              int maxRuns);

/// The median of `seconds` (the upper of an even count); 0 when empty.
double medianSeconds(std::vector<double> seconds);

/// `work` per second at `seconds`; 0 (which the description refuses) when
/// the time is not a positive finite number.
double rateOf(double work, double seconds);

/// Device memory a plan's GPU tier may take: the free memory less what the
/// cuda runtime places beside the plan (a cuBLASLt workspace and kernel
/// scratch per kernel stream, CudaRuntimeOptions) and a headroom of 2% (at
/// least 1 GiB) for cuBLASLt's and the driver's own; 0 if nothing is left.
uint64_t usableGpuBytes(uint64_t freeBytes);

/// Host memory the CPU tier may take: the physical memory less what the
/// system, the process and the device tier's host staging keep (an eighth,
/// at least 8 GiB).
uint64_t usableHostBytes(uint64_t physicalBytes);

/// NVMe the tier may take: 90% of the free space under --nvme-dir.
uint64_t usableNvmeBytes(uint64_t availableBytes);

/// The description these figures give, over `host` (whose host fields,
/// cpu_mem_bandwidth, cpu_adam_params_per_second and the NVMe rates, were
/// measured by rt::measureHostSide). An error names the first figure that is
/// not a usable positive number.
llvm::Expected<Hardware> describeCudaMachine(const CudaFigures &figures,
                                             const Hardware &host);

/// `hw` as JSON that --hw reads back, with a "description", the "sources"
/// of each measured field and a "calibration" object of the raw figures
/// (every GEMM by precision, bytes and seconds of each copy): documentation
/// that the parser skips.
std::string cudaDescriptionJson(const Hardware &hw, const CudaFigures &figures);

/// Measures device 0 (CudaCalibrate.cpp). Errors: no device ("--calibrate
/// --backend=cuda needs a CUDA device ..."), and every failing CUDA call,
/// named.
llvm::Expected<CudaFigures>
measureCudaDevice(const rt::CalibrateOptions &options);

/// The whole of zinc-run --calibrate --backend=cuda: the device, the host,
/// the description as JSON text.
llvm::Expected<std::string>
calibrateCudaMachine(const rt::CalibrateOptions &options);

} // namespace zinc::cuda

#endif
