//===- BackendRegistryChecks.h - A backend's kernels agree with Ops.def ---===//
//
// Each backend registers its kernels itself (CpuKernels.def, CudaOps.def);
// each op's definition says which backends run it (Ops.def's Backends). The
// two checks every backend's registry test makes, for any backend.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_TEST_UNIT_OPS_BACKENDREGISTRYCHECKS_H
#define ZINC_TEST_UNIT_OPS_BACKENDREGISTRYCHECKS_H

#include "zinc/ops/OpDefinition.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "gtest/gtest.h"
#include <set>
#include <string>

namespace zinc::registrychecks {

/// The backend as the messages name it: "cpu" and its Backends column
/// spelling "Cpu", and the table that registers its kernels.
struct BackendNames {
  ops::Backend backend;
  const char *name, *column, *table;
};

/// Every registered kernel (each with `domain` and `opType`) is for an op
/// Ops.def defines and declares to run on the backend, registered once.
template <typename Kernels>
void expectKernelsAreForDeclaredOps(const Kernels &kernels,
                                    const BackendNames &b) {
  std::set<std::string> seen;
  for (const auto &k : kernels) {
    std::string name =
        (k.domain.empty() ? "" : k.domain.str() + ".") + k.opType.str();
    EXPECT_TRUE(seen.insert(name).second) << name << " is registered twice";
    const ops::OpDefinition *def = ops::lookupOp(k.domain, k.opType);
    ASSERT_NE(def, nullptr)
        << "the " << b.name << " backend has a kernel for " << name
        << ", which include/zinc/ops/Ops.def does not define";
    EXPECT_TRUE(def->hasKernelOn(b.backend))
        << "the " << b.name << " backend has a kernel for " << name
        << ", whose definition does not list " << b.column
        << " among its Backends";
  }
}

/// Every op declared to run on the backend has a kernel (`hasKernel`), and
/// no other op has one.
inline void expectDeclaredOpsHaveKernels(
    const BackendNames &b,
    llvm::function_ref<bool(llvm::StringRef domain, llvm::StringRef op)>
        hasKernel) {
  for (const ops::OpDefinition &def : ops::allOps()) {
    bool has = hasKernel(def.domain, def.name);
    EXPECT_EQ(has, def.hasKernelOn(b.backend))
        << def.qualifiedName()
        << (has ? std::string(": a ") + b.name +
                      " kernel, but its definition does not list " + b.column
                : std::string(": its definition lists ") + b.column +
                      ", but the " + b.name + " backend has no kernel (" +
                      b.table + ")");
  }
}

} // namespace zinc::registrychecks

#endif
