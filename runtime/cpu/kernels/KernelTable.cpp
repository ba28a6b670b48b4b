//===- KernelTable.cpp - Op type to cpu kernel, generated from Ops.def ----===//
#include "Kernels.h"
#include "llvm/ADT/StringMap.h"

namespace zinc::cpu {

KernelFn lookupKernel(llvm::StringRef opType) {
  static const llvm::StringMap<KernelFn> table = [] {
    llvm::StringMap<KernelFn> t;
#define ZINC_OP(Name, Types, Fn) t[#Name] = &Fn;
#include "zinc/support/Ops.def"
    return t;
  }();
  auto it = table.find(opType);
  return it == table.end() ? nullptr : it->second;
}

KernelFn lookupZincKernel(llvm::StringRef opType) {
  static const llvm::StringMap<KernelFn> table = [] {
    llvm::StringMap<KernelFn> t;
#define ZINC_ZOP(Name, Fn, Effects) t[#Name] = &Fn;
#include "zinc/support/ZincOps.def"
    return t;
  }();
  auto it = table.find(opType);
  return it == table.end() ? nullptr : it->second;
}

llvm::Error kernelError(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

} // namespace zinc::cpu
