//===- ScalarOperand.h - Optional scalar operands, on the host or device --===//
//
// Clip's min and max and Trilu's k are one-element tensors. The executor
// keeps small constants in pinned host memory, where the host reads them
// as the other kernels read their index lists (DataMovement.cu, Training.cu)
// and passes the value to the kernel; one computed on the GPU stays there
// and the kernel reads it itself, since reading it here would synchronise.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_CUDA_KERNELS_SCALAROPERAND_H
#define ZINC_RUNTIME_CUDA_KERNELS_SCALAROPERAND_H

#include "zinc/runtime/cuda/CudaKernel.h"
#include "zinc/support/DType.h"
#include <cstring>

namespace zinc::cuda {

/// Defined in DataMovement.cu: whether the host may read `p` (pinned,
/// managed or ordinary host memory).
llvm::Expected<bool> isHostReadable(const void *p);

/// Where a kernel finds an optional scalar operand.
struct ScalarOperand {
  bool present = false;
  /// Its device address when the host may not read it; null otherwise.
  const void *device = nullptr;
  /// Its bytes, read on the host (when present and `device` is null).
  alignas(8) unsigned char bytes[8] = {};

  /// The host copy as a T (an element type of at most 8 bytes).
  template <typename T> T hostValue() const {
    static_assert(sizeof(T) <= sizeof(bytes), "scalar wider than 8 bytes");
    T v;
    std::memcpy(&v, bytes, sizeof(T));
    return v;
  }
};

/// Locates `t` (null: absent), a one-element tensor the caller has checked:
/// its bytes when the host may read them, its address otherwise.
inline llvm::Expected<ScalarOperand> locateScalar(const CudaKernelCall &call,
                                                  const DeviceTensor *t,
                                                  llvm::StringRef what) {
  ScalarOperand s;
  if (!t)
    return s;
  s.present = true;
  if (!t->data)
    return cudaKernelError(call.opType + ": " + what +
                           " has a null device pointer");
  size_t bytes = dtypeSize(t->dtype);
  if (bytes > sizeof(s.bytes))
    return cudaKernelError("unsupported: " + call.opType + " with " + what +
                           " of " + dtypeName(t->dtype));
  auto readable = isHostReadable(t->data);
  if (!readable)
    return readable.takeError();
  if (*readable)
    std::memcpy(s.bytes, t->data, bytes);
  else
    s.device = t->data;
  return s;
}

} // namespace zinc::cuda

#endif
