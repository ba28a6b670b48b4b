//===- ExecutionHooks.h - What a device backend adds to the executor ------===//
//
// The executor orders a plan's streams on the host: one worker per stream,
// event counts under a mutex. On the cpu backend that is the whole story.
// A device backend (runtime/cuda) plugs in here: its device streams only
// queue work, so an instruction whose host-side waits are satisfied may
// still have to wait for device work, and the step ends when the device is
// through, not when the workers are. The GPU tier then lives in device
// memory, and Program's GPU arena is its host mirror: graph inputs are fed
// there and copied in, and what the host reads (the loss, outputs,
// checkpointed state) is copied back.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_EXECUTIONHOOKS_H
#define ZINC_RUNTIME_EXECUTIONHOOKS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"
#include <cstdint>

namespace zinc::comm {
class Communicator;
}

namespace zinc::rt {

struct PreparedInstruction;
struct TransferBytes;

/// Which batch a run of the plan is, as every kernel call sees it
/// (cpu::KernelCall, cuda::CudaKernelCall): the 1-based optimizer step, the
/// micro-batch of it (gradient accumulation, Plan.grad_accum) and the run's
/// seed.
struct StepContext {
  int64_t step = 1;
  int64_t microBatch = 0;
  int64_t microBatches = 1;
  uint64_t seed = 0;

  /// Whether update_only instructions do their work in this run.
  bool lastMicroBatch() const { return microBatch + 1 >= microBatches; }
};

class ExecutionHooks {
public:
  virtual ~ExecutionHooks();

  /// Called once `inst`'s host-side waits are satisfied, before it runs:
  /// makes the device work it waits for precede it (a stream wait for
  /// device work, a blocking wait for host work).
  virtual llvm::Error beforeRun(const PreparedInstruction &inst) = 0;
  /// Whether `inst`'s device-side waits have completed, without blocking
  /// (the NVMe lane's look-ahead).
  virtual bool deviceReady(const PreparedInstruction &inst) = 0;
  /// Runs (or queues) plan instruction `index`, counting the bytes it moves.
  virtual llvm::Error run(PreparedInstruction &inst, unsigned index,
                          const StepContext &ctx, TransferBytes &bytes) = 0;
  /// Called instead of run() for an update_only instruction outside an
  /// optimizer step's last micro-batch, after beforeRun(): it does no work,
  /// but whatever waits for its signals must still come after what it
  /// waited for (a device stream records its event after its stream waits).
  virtual llvm::Error skip(const PreparedInstruction &inst, unsigned index) = 0;
  /// After every worker is through: waits for the device's work of the
  /// step and copies back what the host reads after a step.
  virtual llvm::Error finishStep() = 0;
  /// Serial runs (ZINC_SERIAL=1): waits for the instruction just run, so
  /// that a fault is reported against it.
  virtual llvm::Error finishInstruction(const PreparedInstruction &inst) = 0;
  /// Measured: the end of the highest byte of the GPU tier the device has
  /// changed since start-up (0 when nothing was).
  virtual llvm::Expected<uint64_t> measuredGpuPeak() = 0;

  /// Copies the graph inputs `ids`, fed in host memory, to the device.
  virtual llvm::Error inputsToDevice(llvm::ArrayRef<uint32_t> ids) = 0;
  /// Copies every persistent GPU-tier tensor (weights, states) between the
  /// host mirror and the device: in before the first step (after a
  /// resume), out before a checkpoint or saved weights are written.
  virtual llvm::Error stateToDevice() = 0;
  virtual llvm::Error stateToHost() = 0;

  /// Measured: seconds start-up spent page-locking host memory for DMA
  /// (zinc-run's start-up report).
  virtual double pinSeconds() const { return 0; }

  /// The communicator the device's collectives run on, when it is not the
  /// program's (the cuda backend's NCCL or staged MPI): the step loop reads
  /// the collective bytes of --metrics from it.
  virtual comm::Communicator *deviceCommunicator() { return nullptr; }

  /// The device it runs on (the cuda backend's ordinal; -1 for none), so
  /// that a second program of the run (the evaluation's) goes on the same.
  virtual int deviceOrdinal() const { return -1; }
};

} // namespace zinc::rt

#endif
