//===- CudaKernels.h - The cuda kernels of CudaOps.def (internal) ---------===//
#ifndef ZINC_RUNTIME_CUDA_KERNELS_CUDAKERNELS_H
#define ZINC_RUNTIME_CUDA_KERNELS_CUDAKERNELS_H

#include "zinc/runtime/cuda/CudaKernel.h"

namespace zinc::cuda {

#define ZINC_CUDA_OP(Domain, OpType, Fn) llvm::Error Fn(const CudaKernelCall &);
#include "CudaOps.def"

} // namespace zinc::cuda

#endif
