//===- CudaKernelRegistryTest.cpp - The cuda kernels agree with Ops.def ---===//
//
// The cuda backend registers its kernels itself (CudaOps.def); each op's
// definition says whether the cuda backend runs it (Ops.def's Backends).
// Needs no device: it compares tables.
//
//===----------------------------------------------------------------------===//
#include "zinc/ops/OpDefinition.h"
#include "zinc/runtime/cuda/CudaKernel.h"
#include "gtest/gtest.h"
#include <set>

using namespace zinc;

namespace {

TEST(CudaKernelRegistry, EveryKernelIsForAnOpDeclaredToRunOnCuda) {
  std::set<std::string> seen;
  for (const cuda::RegisteredCudaKernel &k : cuda::registeredCudaKernels()) {
    std::string name =
        (k.domain.empty() ? "" : k.domain.str() + ".") + k.opType.str();
    EXPECT_TRUE(seen.insert(name).second) << name << " is registered twice";
    const ops::OpDefinition *def = ops::lookupOp(k.domain, k.opType);
    ASSERT_NE(def, nullptr)
        << "the cuda backend has a kernel for " << name
        << ", which include/zinc/ops/Ops.def does not define";
    EXPECT_TRUE(def->hasKernelOn(ops::Cuda))
        << "the cuda backend has a kernel for " << name
        << ", whose definition does not list Cuda among its Backends";
  }
}

TEST(CudaKernelRegistry, EveryOpDeclaredToRunOnCudaHasAKernel) {
  for (const ops::OpDefinition &def : ops::allOps()) {
    bool has = cuda::lookupCudaKernel(def.domain, def.name) != nullptr;
    EXPECT_EQ(has, def.hasKernelOn(ops::Cuda))
        << def.qualifiedName()
        << (has ? ": a cuda kernel, but its definition does not list Cuda"
                : ": its definition lists Cuda, but the cuda backend has no "
                  "kernel (runtime/cuda/kernels/CudaOps.def)");
  }
}

} // namespace
