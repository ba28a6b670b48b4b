//===- CudaKernelRegistryTest.cpp - The cuda kernels agree with Ops.def ---===//
//
// The cuda backend registers its kernels itself (CudaOps.def); each op's
// definition says whether the cuda backend runs it (Ops.def's Backends).
// Needs no device: it compares tables.
//
//===----------------------------------------------------------------------===//
#include "zinc/runtime/cuda/CudaKernel.h"
#include "test/unit/ops/BackendRegistryChecks.h"
#include "gtest/gtest.h"

using namespace zinc;

namespace {

const registrychecks::BackendNames kCuda{ops::Cuda, "cuda", "Cuda",
                                  "runtime/cuda/kernels/CudaOps.def"};

TEST(CudaKernelRegistry, EveryKernelIsForAnOpDeclaredToRunOnCuda) {
  registrychecks::expectKernelsAreForDeclaredOps(cuda::registeredCudaKernels(), kCuda);
}

TEST(CudaKernelRegistry, EveryOpDeclaredToRunOnCudaHasAKernel) {
  registrychecks::expectDeclaredOpsHaveKernels(
      kCuda, [](llvm::StringRef domain, llvm::StringRef op) {
        return cuda::lookupCudaKernel(domain, op) != nullptr;
      });
}

} // namespace
