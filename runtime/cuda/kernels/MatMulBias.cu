//===- MatMulBias.cu - Starting values of a GEMM's output rows ------------===//
//
// A copy with broadcast, run once before a GEMM that accumulates onto it.
// It moves bits, not values, so one instantiation per element size serves
// every type and no rounding can differ from the cpu kernel's.
//
//===----------------------------------------------------------------------===//
#include "MatMulBias.h"
#include "zinc/runtime/cuda/CudaCheck.h"
#include "zinc/support/Error.h"
#include "llvm/ADT/Twine.h"
#include <algorithm>

namespace zinc::cuda {
namespace {

constexpr unsigned kThreads = 256;
/// Enough blocks to fill any current GPU (132 multiprocessors x 16), the
/// grid-stride loop doing the rest. Computed here rather than with
/// CudaKernel.h's gridFor, whose header nvcc warns about.
constexpr int64_t kMaxBlocks = 132 * 16;

/// One output element per step of a grid-stride loop over rows x cols.
template <typename Bits>
__global__ void __launch_bounds__(kThreads)
    fillRowsKernel(const Bits *__restrict__ src, int64_t rowStride,
                   int64_t colStride, Bits *__restrict__ y, int64_t rows,
                   int64_t cols, int64_t ldy) {
  int64_t total = rows * cols;
  int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += step) {
    int64_t i = e / cols, j = e - i * cols;
    y[i * ldy + j] = src[i * rowStride + j * colStride];
  }
}

template <typename Bits>
llvm::Error launchAs(const void *src, int64_t rowStride, int64_t colStride,
                     void *y, int64_t rows, int64_t cols, int64_t ldy,
                     cudaStream_t stream) {
  int64_t blocks =
      std::min<int64_t>((rows * cols + kThreads - 1) / kThreads, kMaxBlocks);
  fillRowsKernel<Bits><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      static_cast<const Bits *>(src), rowStride, colStride,
      static_cast<Bits *>(y), rows, cols, ldy);
  return checkLaunch("fillRowsKernel(" + llvm::Twine(rows) + "x" +
                     llvm::Twine(cols) + ")");
}

} // namespace

llvm::Error launchFillRows(DType dtype, const void *src, int64_t srcRowStride,
                           int64_t srcColStride, void *y, int64_t rows,
                           int64_t cols, int64_t ldy, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0)
    return llvm::Error::success();
  switch (dtypeSize(dtype)) {
  case 2:
    return launchAs<uint16_t>(src, srcRowStride, srcColStride, y, rows, cols,
                              ldy, stream);
  case 4:
    return launchAs<uint32_t>(src, srcRowStride, srcColStride, y, rows, cols,
                              ldy, stream);
  case 8:
    return launchAs<uint64_t>(src, srcRowStride, srcColStride, y, rows, cols,
                              ldy, stream);
  default:
    return makeError("unsupported: filling GEMM rows of " + dtypeName(dtype));
  }
}

} // namespace zinc::cuda
