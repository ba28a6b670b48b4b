//===- CudaCheck.cpp - CUDA and cuBLAS return codes as llvm::Error --------===//
#include "zinc/runtime/cuda/CudaCheck.h"
#include "zinc/support/Error.h"

namespace zinc::cuda {

llvm::Error checkCuda(cudaError_t status, const llvm::Twine &call) {
  if (status == cudaSuccess)
    return llvm::Error::success();
  // The runtime also records the failure as this thread's last error;
  // consume it here, where it is reported, so that checkLaunch does not
  // blame it on the next kernel launch. (Sticky errors stay regardless.)
  (void)cudaGetLastError();
  // cudaGetErrorString needs no driver, so this works on a machine without
  // a GPU too, which is where "no CUDA-capable device" has to be readable.
  return makeError(call + ": " + cudaGetErrorString(status));
}

llvm::Error checkCublas(cublasStatus_t status, const llvm::Twine &call) {
  if (status == CUBLAS_STATUS_SUCCESS)
    return llvm::Error::success();
  return makeError(call + ": " + cublasLtGetStatusString(status) + " (" +
                   cublasLtGetStatusName(status) + ")");
}

llvm::Error checkLaunch(const llvm::Twine &kernel) {
  return checkCuda(cudaGetLastError(), "launching " + kernel);
}

} // namespace zinc::cuda
