//===- MatMulBias.h - Starting values of a GEMM's output rows -------------===//
//
// FusedMatMul's bias and ONNX Gemm's C are copied into the output first and
// the GEMM accumulates onto them (beta != 0): simpler than a cuBLASLt
// epilogue, and right for any broadcast of C and any column range of Y.
// And lowerY's zeros above the diagonal, written after the product.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_CUDA_KERNELS_MATMULBIAS_H
#define ZINC_RUNTIME_CUDA_KERNELS_MATMULBIAS_H

#include "zinc/support/DType.h"
#include "llvm/Support/Error.h"
#include <cstdint>
#include <cuda_runtime_api.h>

namespace zinc::cuda {

/// Queues y[i * ldy + j] = src[i * srcRowStride + j * srcColStride] for
/// i < rows, j < cols on `stream`: a bias vector is strides (0, 1), a
/// broadcast C any pair. Elements are copied as bits, so every type of
/// 2, 4 or 8 bytes works; `y` points at the first column written.
llvm::Error launchFillRows(DType dtype, const void *src, int64_t srcRowStride,
                           int64_t srcColStride, void *y, int64_t rows,
                           int64_t cols, int64_t ldy, cudaStream_t stream);

/// Queues y[m][i][j] = 0 for j > i in each of `matrices` dense [rows, cols]
/// matrices, in place (FusedMatMul's lowerY, with Trilu's kernel).
llvm::Error launchZeroAboveDiagonal(DType dtype, void *y, int64_t matrices,
                                    int64_t rows, int64_t cols,
                                    cudaStream_t stream);

} // namespace zinc::cuda

#endif
