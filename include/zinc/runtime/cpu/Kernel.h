//===- Kernel.h - The calling convention of cpu backend kernels -----------===//
#ifndef ZINC_RUNTIME_CPU_KERNEL_H
#define ZINC_RUNTIME_CPU_KERNEL_H

#include "zinc/support/Attribute.h"
#include "zinc/support/DType.h"
#include "zinc/support/OpEffects.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

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
  /// correction counts it).
  int64_t step = 1;
  /// The run's seed (zinc-run --seed): with `step` and a node's `seed_id`,
  /// the key and counter of the random stream Dropout draws its mask from.
  uint64_t seed = 0;

  TensorRef *output(size_t i) const {
    return i < outputs.size() ? outputs[i] : nullptr;
  }

  /// What the op declares it writes (ZincOps.def), set by the executor;
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
};

/// A kernel returns an error (never asserts) for inputs it cannot handle;
/// the executor adds the node's name.
using KernelFn = llvm::Error (*)(const KernelCall &);

/// The kernel for an ONNX op type, or null. Built from support/Ops.def.
KernelFn lookupKernel(llvm::StringRef opType);
/// The kernel for an op of zinc's own domain ("zinc"), or null. Built from
/// support/ZincOps.def.
KernelFn lookupZincKernel(llvm::StringRef opType);

/// An error whose message is `msg`; kernels use it for bad inputs.
llvm::Error kernelError(const llvm::Twine &msg);

} // namespace zinc::cpu

#endif
