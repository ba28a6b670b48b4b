//===- KernelRegistryTest.cpp - The cpu kernels agree with Ops.def --------===//
//
// The cpu backend registers its kernels itself (CpuKernels.def); each op's
// definition says whether the cpu backend runs it (Ops.def's Backends). A
// kernel for an op that is not defined, or not declared to run on the cpu,
// fails here, and so does a declared op without a kernel.
//
//===----------------------------------------------------------------------===//
#include "zinc/ops/OpDefinition.h"
#include "zinc/runtime/cpu/Kernel.h"
#include "gtest/gtest.h"
#include <set>

using namespace zinc;

namespace {

cpu::KernelFn cpuKernel(llvm::StringRef domain, llvm::StringRef op) {
  return domain.empty() ? cpu::lookupKernel(op) : cpu::lookupZincKernel(op);
}

TEST(CpuKernelRegistry, EveryKernelIsForAnOpDeclaredToRunOnTheCpu) {
  std::set<std::string> seen;
  for (const cpu::RegisteredKernel &k : cpu::registeredKernels()) {
    std::string name =
        (k.domain.empty() ? "" : k.domain.str() + ".") + k.opType.str();
    EXPECT_TRUE(seen.insert(name).second) << name << " is registered twice";
    const ops::OpDefinition *def = ops::lookupOp(k.domain, k.opType);
    ASSERT_NE(def, nullptr)
        << "the cpu backend has a kernel for " << name
        << ", which include/zinc/ops/Ops.def does not define";
    EXPECT_TRUE(def->hasKernelOn(ops::Cpu))
        << "the cpu backend has a kernel for " << name
        << ", whose definition does not list Cpu among its Backends";
  }
}

TEST(CpuKernelRegistry, EveryOpDeclaredToRunOnTheCpuHasAKernel) {
  for (const ops::OpDefinition &def : ops::allOps()) {
    bool has = cpuKernel(def.domain, def.name) != nullptr;
    EXPECT_EQ(has, def.hasKernelOn(ops::Cpu))
        << def.qualifiedName()
        << (has ? ": a cpu kernel, but its definition does not list Cpu"
                : ": its definition lists Cpu, but the cpu backend has no "
                  "kernel (runtime/cpu/kernels/CpuKernels.def)");
  }
}

} // namespace
