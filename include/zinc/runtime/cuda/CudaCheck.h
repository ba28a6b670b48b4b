//===- CudaCheck.h - CUDA and cuBLAS return codes as llvm::Error ----------===//
//
// Every CUDA runtime and cuBLASLt call in the cuda backend goes through
// these, so that a failure is an error that names the call and what it was
// asked to do ("cudaMalloc(2147483648 bytes): out of memory"), never an
// assert or an ignored status.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_CUDA_CUDACHECK_H
#define ZINC_RUNTIME_CUDA_CUDACHECK_H

#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"
#include <cublasLt.h>
#include <cuda_runtime_api.h>

namespace zinc::cuda {

/// Success for cudaSuccess; otherwise an error "<call>: <CUDA's description>",
/// where `call` says what was attempted, e.g. "cudaMalloc(1024 bytes)".
llvm::Error checkCuda(cudaError_t status, const llvm::Twine &call);

/// Success for CUBLAS_STATUS_SUCCESS; otherwise an error
/// "<call>: <cuBLAS's description> (<status name>)".
llvm::Error checkCublas(cublasStatus_t status, const llvm::Twine &call);

/// Checks that the kernel launch just made on this thread was accepted
/// (bad configuration, no kernel image for this GPU); `kernel` names it.
/// Launches report such errors only through cudaGetLastError, which also
/// clears them so that they are not blamed on a later call.
llvm::Error checkLaunch(const llvm::Twine &kernel);

} // namespace zinc::cuda

/// Sugar for the common case where the call's own text names it well
/// enough: returns the error from the enclosing function.
#define ZINC_CUDA_TRY(expr)                                                    \
  do {                                                                         \
    if (llvm::Error zincCudaErr = ::zinc::cuda::checkCuda((expr), #expr))      \
      return ::llvm::Error(std::move(zincCudaErr));                            \
  } while (false)
#define ZINC_CUBLAS_TRY(expr)                                                  \
  do {                                                                         \
    if (llvm::Error zincCublasErr = ::zinc::cuda::checkCublas((expr), #expr))  \
      return ::llvm::Error(std::move(zincCublasErr));                          \
  } while (false)

#endif
