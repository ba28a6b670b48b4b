//===- DeviceTensor.h - A dense tensor in device memory, for cuda kernels -===//
//
// The cuda counterpart of cpu::TensorRef, kept a separate type so that a
// host pointer can never be handed to a kernel that expects a device one.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_CUDA_DEVICETENSOR_H
#define ZINC_RUNTIME_CUDA_DEVICETENSOR_H

#include "zinc/support/DType.h"
#include "llvm/ADT/SmallVector.h"
#include <cstdint>

namespace zinc::cuda {

/// A dense row-major tensor whose elements live in device memory: the plan
/// fixes dtype and shape, the arena fixes `data`.
struct DeviceTensor {
  DType dtype = DType::F32;
  llvm::SmallVector<int64_t, 6> shape;
  void *data = nullptr;

  int64_t numElements() const { return zinc::numElements(shape); }
  size_t byteSize() const { return numElements() * dtypeSize(dtype); }
};

} // namespace zinc::cuda

#endif
