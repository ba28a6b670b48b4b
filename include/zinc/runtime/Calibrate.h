//===- Calibrate.h - Measuring this machine into a hardware description ---===//
//
// zinc-run --calibrate [--nvme-dir=DIR] > hw.json: what the cpu backend
// actually achieves here, as a description --hw accepts, so that the cost
// model predicts steps of this machine from measurements:
//   gpu_flops_fp32       an fp32 GEMM (1024^3) through the cpu backend's GEMM
//                        (split over the OpenMP team), best of several
//   gpu_flops_fp16       the same GEMM on one thread: the cpu backend widens
//                        16-bit operands and multiplies them on one thread
//   gpu_mem_bandwidth,   a STREAM triad over the OpenMP team (the emulated
//   cpu_mem_bandwidth    GPU tier is host memory)
//   h2d/d2h_bandwidth    memcpy of 64 MiB (the cpu backend's copies)
//   cpu_adam_params_...  the vectorised CPU AdamW on 16M parameters
//   nvme_read/write_...  with --nvme-dir, sequential transfers through the
//                        NVMe tier itself (libaio, O_DIRECT, its block size
//                        and queue depth), after a warm-up write
//   kernel_launch_...    the executor's cost per instruction: a handoff
//                        between two threads through a mutex and condition
//                        variable, as a stream waits on another's event
// Capacities stay this machine's (`cpu`); every field measured is named on
// stderr with its figure. With --backend=cuda the device is measured
// instead (runtime/cuda/CudaCalibrate.cpp), and the host's side of it here
// (measureHostSide).
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_CALIBRATE_H
#define ZINC_RUNTIME_CALIBRATE_H

#include "zinc/support/Hardware.h"
#include <functional>
#include <memory>
#include <string>

namespace zinc::rt {

class ExecutionHooks;
class Program;

struct CalibrateOptions {
  /// Where the NVMe measurement puts its file; empty skips it.
  std::string nvmeDir;
  uint64_t nvmeBytes = 256ull << 20;
  uint64_t nvmeBlockBytes = 1 << 20;
  unsigned nvmeQueueDepth = 32;
  /// Hears each measurement as it is made.
  std::function<void(const std::string &)> progress;
};

llvm::Expected<Hardware> calibrateThisMachine(const CalibrateOptions &options);

/// The host's side of a machine whose GPU is measured elsewhere, into `hw`:
/// cpu_mem_bandwidth (a triad over the OpenMP team),
/// cpu_adam_params_per_second (the vectorised AdamW) and, with a
/// `nvmeDir`, the NVMe tier's rates and latencies. Nothing else changes.
llvm::Error measureHostSide(const CalibrateOptions &options, Hardware &hw);

/// What the executor pays per instruction, measured by running synthetic
/// plans through it.
struct ExecutorCosts {
  /// An instruction that waits for nothing: a small Add on the compute
  /// stream after another.
  double dispatch = 0;
  /// What a wait on another stream's event adds when the waiter is blocked:
  /// compute and h2d taking turns, each waiting for the other.
  double wait = 0;
};

/// Makes a device backend's hooks for a program (the cuda backend's).
using DeviceHooksFactory =
    std::function<llvm::Expected<std::unique_ptr<ExecutionHooks>>(Program &)>;

/// The executor's costs on the cpu backend or, given `device`, on that
/// device backend (its streams, launches and events).
llvm::Expected<ExecutorCosts> measureExecutorCosts(const DeviceHooksFactory &device = {});

} // namespace zinc::rt

#endif
