//===- KernelTable.cpp - Op type to cpu kernel, from CpuKernels.def -------===//
#include "Kernels.h"
#include "zinc/ops/OpEffects.h"
#include "llvm/ADT/StringMap.h"
#include <string_view>

namespace zinc::cpu {

namespace {
struct Entry {
  RegisteredKernel op;
  KernelFn fn;
};

const Entry kKernels[] = {
#define ZINC_CPU_KERNEL(Domain, OpType, Fn)                                    \
  {{std::string_view(#Domain) == "Zinc" ? llvm::StringRef(kZincDomain)         \
                                        : llvm::StringRef(),                   \
    #OpType},                                                                  \
   &Fn},
#include "CpuKernels.def"
};

/// ONNX ops' kernels and zinc ops' kernels, by op type.
const std::pair<llvm::StringMap<KernelFn>, llvm::StringMap<KernelFn>> &
tables() {
  static const auto t = [] {
    std::pair<llvm::StringMap<KernelFn>, llvm::StringMap<KernelFn>> t;
    for (const Entry &e : kKernels)
      (e.op.domain.empty() ? t.first : t.second)[e.op.opType] = e.fn;
    return t;
  }();
  return t;
}

KernelFn find(const llvm::StringMap<KernelFn> &table, llvm::StringRef opType) {
  auto it = table.find(opType);
  return it == table.end() ? nullptr : it->second;
}
} // namespace

KernelFn lookupKernel(llvm::StringRef opType) {
  return find(tables().first, opType);
}

KernelFn lookupZincKernel(llvm::StringRef opType) {
  return find(tables().second, opType);
}

llvm::ArrayRef<RegisteredKernel> registeredKernels() {
  static const std::vector<RegisteredKernel> all = [] {
    std::vector<RegisteredKernel> v;
    for (const Entry &e : kKernels)
      v.push_back(e.op);
    return v;
  }();
  return all;
}

llvm::Error kernelError(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

} // namespace zinc::cpu
