//===- CudaRuntime.h - Running a plan's GPU side on a CUDA device ---------===//
//
// The cuda backend, as the executor's hooks (ExecutionHooks.h). At start-up
// it makes everything a step uses, and nothing after:
//   - one cudaMalloc: the plan's GPU tier at the plan's offsets, then each
//     device stream's cuBLASLt workspace and kernel scratch;
//   - the CPU tier's arena page-locked in place (cudaHostRegister), so
//     prefetches and evictions are asynchronous DMA, and NVMe transfers and
//     the host optimizer work on that same pinned memory;
//   - a CUDA stream per device stream of the plan (compute, h2d, d2h,
//     collective) and a CUDA event per instruction that signals;
//   - ops whose results depend on no tensor's values (Constant, Shape,
//     ConstantOfShape, and what only reads those) computed once by the cpu
//     kernels into pinned memory, copied in each step.
// Device streams only queue work: an instruction's plan waits become
// cudaStreamWaitEvent on the events of the device instructions it waits
// for, and the host streams (host, nvme) block on those events instead.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_CUDA_CUDARUNTIME_H
#define ZINC_RUNTIME_CUDA_CUDARUNTIME_H

#include "zinc/runtime/ExecutionHooks.h"
#include "zinc/runtime/Program.h"
#include "zinc/runtime/comm/DevicePlacement.h"
#include "zinc/runtime/cuda/StagedCommunicator.h"
#include "llvm/Support/Error.h"
#include <memory>

namespace zinc::cuda {

struct CudaRuntimeOptions {
  /// f32 GEMMs may use TF32 tensor cores (zinc-run --allow-tf32).
  bool allowTf32 = false;
  /// Which CUDA device for a plan of one rank. A plan of several takes
  /// its rank's (comm/DevicePlacement.h's chooseDevice).
  int device = 0;
  /// Several ranks: how their collectives travel (zinc-run --comm), and
  /// the collectives' timeout. The ranks' host communicator is the
  /// program's (MPI; Program::communicator()).
  comm::CommKind comm = comm::CommKind::Auto;
  double collectiveTimeout = 300;
  /// Where the comm is MPI: its staging through pinned host memory.
  StagingOptions staging;
  /// Scratch per device stream for the cuda kernels.
  uint64_t scratchBytes = uint64_t(64) << 20;
};

/// Whether the cuda backend can run `program` at all, device aside: an
/// error naming every op of its device streams that has no cuda kernel.
/// createCudaRuntime checks this too.
llvm::Error checkCudaSupport(rt::Program &program);

/// Loads `program`'s GPU side onto the device. Errors, all before any step:
/// no CUDA device ("--backend=cuda needs a CUDA device: ..."), ops with no
/// cuda kernel (all of them named), a communicator the ranks cannot use
/// (--comm=nccl with ranks sharing a GPU), and every failing CUDA, NCCL or
/// MPI call, named. With several ranks, each rank's device is its local
/// rank's (DevicePlacement.h) and its collectives run on the collective
/// stream over NCCL or MPI staged through the host.
llvm::Expected<std::unique_ptr<rt::ExecutionHooks>>
createCudaRuntime(rt::Program &program, const CudaRuntimeOptions &opts = {});

} // namespace zinc::cuda

#endif
