//===- Kernels.h - Declarations of every cpu kernel named in Ops.def ------===//
#ifndef ZINC_RUNTIME_CPU_KERNELS_KERNELS_H
#define ZINC_RUNTIME_CPU_KERNELS_KERNELS_H

#include "zinc/runtime/cpu/Kernel.h"

namespace zinc::cpu {
#define ZINC_OP(Name, Types, Fn) llvm::Error Fn(const KernelCall &call);
#include "zinc/support/Ops.def"
#define ZINC_ZOP(Name, Fn, Effects) llvm::Error Fn(const KernelCall &call);
#include "zinc/support/ZincOps.def"
} // namespace zinc::cpu

#endif
