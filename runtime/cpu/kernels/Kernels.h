//===- Kernels.h - Declarations of every cpu kernel in CpuKernels.def -----===//
#ifndef ZINC_RUNTIME_CPU_KERNELS_KERNELS_H
#define ZINC_RUNTIME_CPU_KERNELS_KERNELS_H

#include "zinc/runtime/cpu/Kernel.h"

namespace zinc::cpu {
#define ZINC_CPU_KERNEL(Domain, OpType, Fn)                                    \
  llvm::Error Fn(const KernelCall &call);
#include "CpuKernels.def"
} // namespace zinc::cpu

#endif
