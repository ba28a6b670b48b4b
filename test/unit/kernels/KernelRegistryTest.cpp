//===- KernelRegistryTest.cpp - The cpu kernels agree with Ops.def --------===//
//
// The cpu backend registers its kernels itself (CpuKernels.def); each op's
// definition says whether the cpu backend runs it (Ops.def's Backends). A
// kernel for an op that is not defined, or not declared to run on the cpu,
// fails here, and so does a declared op without a kernel.
//
//===----------------------------------------------------------------------===//
#include "zinc/runtime/cpu/Kernel.h"
#include "test/unit/ops/BackendRegistryChecks.h"
#include "gtest/gtest.h"

using namespace zinc;

namespace {

const registrychecks::BackendNames kCpu{ops::Cpu, "cpu", "Cpu",
                                 "runtime/cpu/kernels/CpuKernels.def"};

TEST(CpuKernelRegistry, EveryKernelIsForAnOpDeclaredToRunOnTheCpu) {
  registrychecks::expectKernelsAreForDeclaredOps(cpu::registeredKernels(), kCpu);
}

TEST(CpuKernelRegistry, EveryOpDeclaredToRunOnTheCpuHasAKernel) {
  registrychecks::expectDeclaredOpsHaveKernels(
      kCpu, [](llvm::StringRef domain, llvm::StringRef op) {
        return (domain.empty() ? cpu::lookupKernel(op)
                               : cpu::lookupZincKernel(op)) != nullptr;
      });
}

} // namespace
