//===- MatMulGeometry.cpp - The GEMMs of a numpy matmul -------------------===//
#include "zinc/support/MatMulGeometry.h"
#include "zinc/support/Error.h"
#include "zinc/support/DType.h"
#include "llvm/ADT/Twine.h"
#include <algorithm>

namespace zinc {

int64_t MatMulGeometry::batchElements() const {
  int64_t e = 1;
  for (int64_t d : batch)
    e *= d;
  return e;
}

llvm::Expected<llvm::SmallVector<int64_t, 6>>
broadcastBatch(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  llvm::SmallVector<int64_t, 6> out(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
    int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (da != db && da != 1 && db != 1)
      return makeError("shapes " + formatShape(a) + " and " + formatShape(b) +
                       " do not broadcast");
    out[rank - 1 - i] = da == 1 ? db : da;
  }
  return out;
}

llvm::SmallVector<int64_t, 6> flattenedToMatrix(llvm::ArrayRef<int64_t> shape) {
  if (shape.size() < 2)
    return llvm::SmallVector<int64_t, 6>(shape.begin(), shape.end());
  int64_t rows = 1;
  for (int64_t d : shape.drop_back())
    rows *= d;
  return {rows, shape.back()};
}

bool stridedMatrixLayout(int64_t rows, int64_t cols, int64_t rowStride,
                         int64_t colStride, bool &transposed, int64_t &ld) {
  if (colStride == 1 || cols == 1) {
    transposed = false;
    ld = rows == 1 ? std::max<int64_t>(cols, 1) : rowStride;
    return ld >= std::max<int64_t>(cols, 1);
  }
  if (rowStride == 1 || rows == 1) {
    transposed = true;
    ld = cols == 1 ? std::max<int64_t>(rows, 1) : colStride;
    return ld >= std::max<int64_t>(rows, 1);
  }
  return false;
}

llvm::Expected<MatMulGeometry> fusedMatMulGeometry(llvm::ArrayRef<int64_t> a,
                                                   llvm::ArrayRef<int64_t> b,
                                                   const AttributeList &attrs) {
  llvm::SmallVector<int64_t, 6> fa(a.begin(), a.end()), fb(b.begin(), b.end());
  if (attrs.getInt("flattenA", 0) != 0)
    fa = flattenedToMatrix(a);
  if (attrs.getInt("flattenB", 0) != 0)
    fb = flattenedToMatrix(b);
  // An operand read through a strided view has the view's shape.
  if (attrs.has("shapeA"))
    fa.assign(attrs.getInts("shapeA").begin(), attrs.getInts("shapeA").end());
  if (attrs.has("shapeB"))
    fb.assign(attrs.getInts("shapeB").begin(), attrs.getInts("shapeB").end());
  return matMulGeometry(fa, fb, attrs.getInt("transA", 0) != 0,
                        attrs.getInt("transB", 0) != 0);
}

llvm::Expected<MatMulGeometry> matMulGeometry(llvm::ArrayRef<int64_t> a,
                                              llvm::ArrayRef<int64_t> b,
                                              bool transA, bool transB) {
  if (a.empty() || b.empty())
    return makeError("operands must have rank >= 1");
  if ((transA && a.size() < 2) || (transB && b.size() < 2))
    return makeError("a transposed operand must have rank >= 2");
  MatMulGeometry g;
  g.a.assign(a.begin(), a.end());
  g.b.assign(b.begin(), b.end());
  bool rowVec = a.size() == 1, colVec = b.size() == 1;
  if (rowVec)
    g.a.insert(g.a.begin(), 1);
  if (colVec)
    g.b.push_back(1);
  int64_t ar = g.a[g.a.size() - 2], ac = g.a.back();
  int64_t br = g.b[g.b.size() - 2], bc = g.b.back();
  g.m = transA ? ac : ar;
  g.k = transA ? ar : ac;
  int64_t kb = transB ? bc : br;
  g.n = transB ? br : bc;
  if (kb != g.k)
    return makeError("shapes " + formatShape(a) + (transA ? "^T" : "") + " and " +
                     formatShape(b) + (transB ? "^T" : "") + " do not multiply");
  auto batch = broadcastBatch(llvm::makeArrayRef(g.a).drop_back(2),
                              llvm::makeArrayRef(g.b).drop_back(2));
  if (!batch)
    return batch.takeError();
  g.batch = *batch;
  g.out = g.batch;
  if (!rowVec)
    g.out.push_back(g.m);
  if (!colVec)
    g.out.push_back(g.n);
  g.folded = !transA && numElements(llvm::makeArrayRef(g.b).drop_back(2)) == 1 &&
             numElements(llvm::makeArrayRef(g.a).drop_back(2)) == g.batchElements();
  return g;
}

bool isMatrixProductOp(llvm::StringRef op) {
  return op == "MatMul" || op == "Gemm" || op == "FusedMatMul" || op == "FusedMatMulInto" ||
         op.startswith("Conv") || op == "Attention" || op == "AttentionGrad";
}

} // namespace zinc
