//===- Kernel.h - The calling convention of cpu backend kernels -----------===//
#ifndef ZINC_RUNTIME_CPU_KERNEL_H
#define ZINC_RUNTIME_CPU_KERNEL_H

#include "zinc/ops/KernelWorkspace.h"
#include "zinc/ops/OpEffects.h"
#include "zinc/support/Attribute.h"
#include "zinc/support/DType.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

namespace zinc::comm {
class Communicator;
}

namespace zinc::cpu {

/// A tensor a kernel reads or writes: the plan fixes dtype and shape, the
/// executor fixes the buffer. Kernels never allocate or resize outputs.
struct TensorRef {
  DType dtype = DType::F32;
  llvm::SmallVector<int64_t, 6> shape;
  void *data = nullptr;

  int64_t numElements() const { return zinc::numElements(shape); }
  size_t byteSize() const { return numElements() * dtypeSize(dtype); }
  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  template <typename T> T *as() const { return static_cast<T *>(data); }
};

/// An error whose message is `msg`; kernels use it for bad inputs.
llvm::Error kernelError(const llvm::Twine &msg);

/// The scratch memory of one kernel call: the part of its stream's workspace
/// (a buffer the plan places in the stream's tier, never the heap) that
/// kernelWorkspaceBytes sizes for the call. Kernels take pieces in order;
/// nothing taken outlives the call.
class Workspace {
public:
  Workspace() = default;
  Workspace(void *base, uint64_t size)
      : base(static_cast<uint8_t *>(base)), size(size) {}

  /// `count` elements of T (a piece of workspacePiece(count * sizeof(T))
  /// bytes), or an error naming the sizes when the plan gave the call less:
  /// the kernel and kernelWorkspaceBytes disagree, and the call must fail
  /// rather than touch memory the plan did not give it.
  template <typename T> llvm::Expected<T *> take(uint64_t count) {
    static_assert(alignof(T) <= kWorkspaceAlignment, "over-aligned scratch");
    uint64_t bytes = workspacePiece(count * sizeof(T));
    if (bytes > size - offset)
      return kernelError("kernel workspace exhausted: a piece of " +
                         llvm::Twine(bytes) + " bytes after " +
                         llvm::Twine(offset) + " of the " + llvm::Twine(size) +
                         " bytes planned for this call");
    T *p = reinterpret_cast<T *>(base + offset);
    offset += bytes;
    return p;
  }
  /// Bytes planned for the call, and taken so far.
  uint64_t capacity() const { return size; }
  uint64_t used() const { return offset; }

private:
  uint8_t *base = nullptr;
  uint64_t size = 0;
  uint64_t offset = 0;
};

/// One invocation of a kernel.
struct KernelCall {
  llvm::StringRef opType;
  llvm::StringRef nodeName;
  /// Version of the ONNX default-domain opset the model imports; kernels use
  /// it where an op's semantics changed between versions (Softmax at 13).
  int64_t opsetVersion = 17;
  const AttributeList &attrs;
  /// nullptr where an optional input is absent.
  llvm::ArrayRef<const TensorRef *> inputs;
  /// nullptr where an optional output is absent.
  llvm::ArrayRef<TensorRef *> outputs;

  const TensorRef *input(size_t i) const {
    return i < inputs.size() ? inputs[i] : nullptr;
  }
  /// 1-based number of the training step being run (Adam's bias
  /// correction counts it): with gradient accumulation, the optimizer step.
  int64_t step = 1;
  /// The run's seed (zinc-run --seed): with `step` and a node's `seed_id`,
  /// the key and counter of the random stream Dropout draws its mask from.
  uint64_t seed = 0;
  /// The call's scratch memory; null gives it none.
  Workspace *workspace = nullptr;
  /// The ranks' communicator (collectives, and this rank's shard); null
  /// for a single rank.
  comm::Communicator *comm = nullptr;
  /// Gradient accumulation: which of the step's `microBatches` micro-batches
  /// this is (0-based). Without it, 0 of 1.
  int64_t microBatch = 0;
  int64_t microBatches = 1;
  /// The 1-based count of batches run, micro-batches included: what keys a
  /// random stream (Dropout), so every micro-batch draws its own masks and
  /// a plan without accumulation draws as before.
  int64_t sampleStep() const { return (step - 1) * microBatches + microBatch + 1; }

  TensorRef *output(size_t i) const {
    return i < outputs.size() ? outputs[i] : nullptr;
  }

  /// What the op declares it writes (Ops.def), set by the executor;
  /// null: looked up as a zinc op (only zinc ops update in place).
  const OpEffects *effects = nullptr;
  /// Input `i` for writing in place: only an input the op declares written
  /// is handed out writable; null otherwise (or where it is absent), so a
  /// kernel cannot update what the plan's ordering treats as read-only.
  TensorRef *updated(size_t i) const {
    const OpEffects *e = effects ? effects : lookupOpEffects(kZincDomain, opType);
    if (!e || !e->writesInput(i) || i >= inputs.size())
      return nullptr;
    // The executor's tensors are mutable; `inputs` is const for readers.
    return const_cast<TensorRef *>(inputs[i]);
  }

  /// `count` elements of T of scratch from the call's workspace (see
  /// Workspace::take).
  template <typename T> llvm::Expected<T *> scratch(uint64_t count) const {
    if (!workspace) {
      Workspace none;
      return none.take<T>(count);
    }
    return workspace->take<T>(count);
  }
};

/// A kernel returns an error (never asserts) for inputs it cannot handle;
/// the executor adds the node's name.
using KernelFn = llvm::Error (*)(const KernelCall &);

/// The kernel for an ONNX op type, or null. The backend's own table,
/// runtime/cpu/kernels/CpuKernels.def.
KernelFn lookupKernel(llvm::StringRef opType);
/// The kernel for an op of zinc's own domain ("zinc"), or null.
KernelFn lookupZincKernel(llvm::StringRef opType);

/// One op the cpu backend has a kernel for: `domain` "" (ONNX) or "zinc".
struct RegisteredKernel {
  llvm::StringRef domain;
  llvm::StringRef opType;
};
/// Every op of CpuKernels.def, in its order (for the test that it agrees
/// with the op definitions' Backends column).
llvm::ArrayRef<RegisteredKernel> registeredKernels();

} // namespace zinc::cpu

#endif
