//===- CudaKernelTable.cpp - Op type to cuda kernel, from CudaOps.def -----===//
#include "CudaKernels.h"
#include "zinc/support/Error.h"
#include "llvm/ADT/StringMap.h"
#include <algorithm>
#include <string_view>
#include <vector>

namespace zinc::cuda {

CudaKernelFn lookupCudaKernel(llvm::StringRef domain, llvm::StringRef opType) {
  using Table = llvm::StringMap<CudaKernelFn>;
  static const std::pair<Table, Table> tables = [] {
    std::pair<Table, Table> t;
#define ZINC_CUDA_OP(Domain, OpType, Fn)                                       \
  (std::string_view(#Domain) == "Zinc" ? t.second : t.first)[#OpType] = &Fn;
#include "CudaOps.def"
    return t;
  }();
  const Table &table = domain == kZincDomain ? tables.second : tables.first;
  auto it = table.find(opType);
  return it == table.end() ? nullptr : it->second;
}

llvm::ArrayRef<RegisteredCudaKernel> registeredCudaKernels() {
  static const std::vector<RegisteredCudaKernel> all = {
#define ZINC_CUDA_OP(Domain, OpType, Fn)                                       \
  {std::string_view(#Domain) == "Zinc" ? llvm::StringRef(kZincDomain)          \
                                       : llvm::StringRef(),                    \
   #OpType},
#include "CudaOps.def"
  };
  return all;
}

llvm::Error cudaKernelError(const llvm::Twine &msg) { return makeError(msg); }

llvm::Error CudaKernelCall::scratchExhausted(uint64_t bytes, uint64_t used,
                                             uint64_t capacity) {
  return makeError("cuda kernel scratch exhausted: a piece of " +
                   llvm::Twine(bytes) + " bytes after " + llvm::Twine(used) +
                   " of the " + llvm::Twine(capacity) +
                   " bytes laid out for this call");
}

unsigned gridFor(int64_t n, unsigned threads) {
  // 132 multiprocessors (H100) x 16 blocks covers any current GPU; the
  // grid-stride loops take the rest.
  int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, 132 * 16));
}

} // namespace zinc::cuda
