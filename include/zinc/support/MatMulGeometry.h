//===- MatMulGeometry.h - The GEMMs of a numpy matmul ---------------------===//
//
// MatMul and zinc.FusedMatMul multiply with numpy's rules: a 1-D left
// operand is a row [1,K], a 1-D right one a column [K,1] (the added axis is
// dropped from the result), leading axes broadcast as a batch. FusedMatMul
// also reads either operand with its last two axes swapped (transA, transB),
// which is how the fold-transposes pass removes Transpose nodes, and either
// operand flattened to a matrix, its leading axes merged into rows
// (flattenA, flattenB: the bytes of a [B,T,C] tensor are those of a
// [B*T,C] matrix), which is how it removes the Reshapes autodiff puts
// around a weight gradient; or either operand as a strided view of another
// tensor (shapeA and viewA = [offset, stride per axis]: attention's heads
// read from the fused q,k,v projection without the Split, Reshape and
// Transpose copies). The kernel, its workspace sizing and the pass
// all take the shapes from here.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_SUPPORT_MATMULGEOMETRY_H
#define ZINC_SUPPORT_MATMULGEOMETRY_H

#include "zinc/support/Attribute.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"

namespace zinc {

struct MatMulGeometry {
  /// Each product is [m, k] x [k, n] (after the transposes).
  int64_t m = 0, n = 0, k = 0;
  /// The operands as at least 2-D shapes (numpy's added axes), and their
  /// broadcast batch.
  llvm::SmallVector<int64_t, 6> a, b, batch;
  /// The result's shape (without the added axes).
  llvm::SmallVector<int64_t, 6> out;
  /// Every batch element of A against one matrix B, A not transposed: the
  /// whole batch is one [batch * m, k] x [k, n] GEMM.
  bool folded = false;
  int64_t batchElements() const;
  /// Rows of each GEMM: m, or batch * m when folded.
  int64_t rows() const { return folded ? m * batchElements() : m; }
};

/// The geometry of op(A) x op(B); an error says why the shapes do not
/// multiply.
llvm::Expected<MatMulGeometry> matMulGeometry(llvm::ArrayRef<int64_t> a,
                                              llvm::ArrayRef<int64_t> b,
                                              bool transA = false,
                                              bool transB = false);

/// `shape` read as a matrix: [product of the leading axes, last axis]. A
/// shape of rank below 2 is returned as it is.
llvm::SmallVector<int64_t, 6> flattenedToMatrix(llvm::ArrayRef<int64_t> shape);

/// The geometry of a MatMul or zinc.FusedMatMul node with operand shapes a
/// and b and the node's attributes (transA, transB, flattenA, flattenB,
/// shapeA, shapeB).
llvm::Expected<MatMulGeometry> fusedMatMulGeometry(llvm::ArrayRef<int64_t> a,
                                                   llvm::ArrayRef<int64_t> b,
                                                   const AttributeList &attrs);

/// How BLAS reads a [rows, cols] matrix stored with `rowStride` and
/// `colStride` (a strided view's last two axes): row-major with leading
/// dimension `ld`, or, when `transposed`, as the row-major transpose. An
/// axis of length 1 may have any stride. False when neither axis is
/// contiguous or the rows (columns) overlap, which BLAS cannot read.
bool stridedMatrixLayout(int64_t rows, int64_t cols, int64_t rowStride,
                         int64_t colStride, bool &transposed, int64_t &ld);

/// numpy broadcasting of two shapes; an error names both.
llvm::Expected<llvm::SmallVector<int64_t, 6>>
broadcastBatch(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b);

/// Whether the op (ONNX or zinc) is a matrix product run by a GEMM library:
/// MatMul, Gemm, FusedMatMul(Into), convolutions (im2col GEMMs) and fused
/// attention (tiles of GEMMs), and their gradients. The cost model charges
/// these a GEMM's fixed cost.
bool isMatrixProductOp(llvm::StringRef op);

} // namespace zinc

#endif
