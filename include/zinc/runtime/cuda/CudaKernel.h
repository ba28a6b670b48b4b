//===- CudaKernel.h - The calling convention of cuda backend kernels ------===//
//
// The cuda counterpart of cpu/Kernel.h: the executor resolves a plan
// instruction whose tensors live in the GPU tier against the device arena
// and calls the op's cuda kernel, which only queues work on `stream` (it
// never synchronises and never allocates). Shapes, types and attributes are
// checked on the host before anything is queued, and every launch is checked
// (checkLaunch), so a bad input is an error naming the op, not a fault.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_CUDA_CUDAKERNEL_H
#define ZINC_RUNTIME_CUDA_CUDAKERNEL_H

#include "zinc/ops/OpEffects.h"
#include "zinc/runtime/cuda/CublasLtGemm.h"
#include "zinc/runtime/cuda/DeviceTensor.h"
#include "zinc/support/Attribute.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"
#include <cuda_runtime_api.h>

namespace zinc::comm {
class Communicator;
}

namespace zinc::cuda {

/// One invocation of a cuda kernel.
struct CudaKernelCall {
  llvm::StringRef opType;
  llvm::StringRef nodeName;
  /// The model's ONNX opset (Softmax's axis semantics changed at 13).
  int64_t opsetVersion = 17;
  const AttributeList &attrs;
  /// nullptr where an optional input or output is absent.
  llvm::ArrayRef<const DeviceTensor *> inputs;
  llvm::ArrayRef<DeviceTensor *> outputs;
  /// 1-based training step (Adam's bias correction): with gradient
  /// accumulation, the optimizer step.
  int64_t step = 1;
  /// Gradient accumulation: this micro-batch (0-based) of the step's
  /// `microBatches` (cpu::KernelCall's).
  int64_t microBatch = 0;
  int64_t microBatches = 1;
  /// Dropout's counter: the 1-based count of batches run, micro-batches
  /// included (cpu::KernelCall::sampleStep).
  int64_t sampleStep() const { return (step - 1) * microBatches + microBatch + 1; }
  /// The run's seed (Dropout's key, with the node's seed_id).
  uint64_t seed = 0;
  /// Where the work is queued: the plan stream's CUDA stream.
  cudaStream_t stream = nullptr;
  /// The stream's cuBLASLt context (its own workspace).
  GemmContext *gemm = nullptr;
  /// f32 GEMMs may use TF32 tensor cores (zinc-run --allow-tf32).
  bool allowTf32 = false;
  /// Device scratch for this call, laid out at start-up; kernels take
  /// pieces in order with scratch<T>(), nothing outlives the call.
  void *workspace = nullptr;
  uint64_t workspaceBytes = 0;
  /// What the op declares it writes (Ops.def), set by the executor.
  const OpEffects *effects = nullptr;
  /// The ranks' communicator over device memory, its collectives queued on
  /// `stream` (NCCL, or MPI staged through the host); null for one rank.
  comm::Communicator *comm = nullptr;

  const DeviceTensor *input(size_t i) const {
    return i < inputs.size() ? inputs[i] : nullptr;
  }
  DeviceTensor *output(size_t i) const {
    return i < outputs.size() ? outputs[i] : nullptr;
  }
  /// Input `i` for writing in place: only an input the op declares
  /// written; null otherwise.
  DeviceTensor *updated(size_t i) const {
    const OpEffects *e = effects ? effects : lookupOpEffects(kZincDomain, opType);
    if (!e || !e->writesInput(i) || i >= inputs.size())
      return nullptr;
    return const_cast<DeviceTensor *>(inputs[i]);
  }
  /// `count` elements of T from the call's scratch, 256-byte aligned, or an
  /// error naming the sizes when the scratch is too small.
  template <typename T> llvm::Expected<T *> scratch(uint64_t count) const {
    uint64_t bytes = (count * sizeof(T) + 255) / 256 * 256;
    if (bytes > workspaceBytes - scratchUsed)
      return scratchExhausted(bytes, scratchUsed, workspaceBytes);
    T *p = reinterpret_cast<T *>(static_cast<char *>(workspace) + scratchUsed);
    scratchUsed += bytes;
    return p;
  }
  /// Scratch bytes taken so far (scratch()'s bookkeeping; the struct stays
  /// an aggregate, so it is public).
  mutable uint64_t scratchUsed = 0;

  /// The error scratch() returns when a piece does not fit.
  static llvm::Error scratchExhausted(uint64_t bytes, uint64_t used,
                                     uint64_t capacity);
};

/// A kernel returns an error for inputs it cannot handle; the executor adds
/// the node's name.
using CudaKernelFn = llvm::Error (*)(const CudaKernelCall &);

/// The cuda kernel of an op, or null: `domain` is "" (ONNX) or "zinc".
CudaKernelFn lookupCudaKernel(llvm::StringRef domain, llvm::StringRef opType);

/// One op the cuda backend has a kernel for: `domain` "" (ONNX) or "zinc".
struct RegisteredCudaKernel {
  llvm::StringRef domain;
  llvm::StringRef opType;
};
/// Every op of CudaOps.def, in its order (for the test that it agrees with
/// the op definitions' Backends column).
llvm::ArrayRef<RegisteredCudaKernel> registeredCudaKernels();

/// An error whose message is `msg`.
llvm::Error cudaKernelError(const llvm::Twine &msg);

/// Grid size for `n` elements at `threads` per block: enough blocks to fill
/// the GPU several times over, grid-stride loops doing the rest.
unsigned gridFor(int64_t n, unsigned threads);

} // namespace zinc::cuda

#endif
