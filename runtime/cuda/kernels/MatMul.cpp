//===- MatMul.cpp - MatMul, Gemm and FusedMatMul(Into) through cuBLASLt ---===//
//
// The cuda counterparts of cpu/kernels/MatMul.cpp: the same geometry
// (MatMulGeometry.h), the same checks and messages, and cuBLASLt for the
// products (CublasLtGemm.h). Strided views (viewA/viewB) and a column range
// of a wider output (outColumn) are leading dimensions, never copies.
// FusedMatMul's bias is cuBLASLt's bias epilogue; Gemm's C is copied into
// the output rows first and the GEMM accumulates onto it (MatMulBias.h). A numpy batch goes to as few GEMM
// calls as its offsets allow: one strided-batched call when A's and B's
// products each step by a constant, otherwise one per run of products that
// do (attention's heads of one sequence), down to one per product.
//
//===----------------------------------------------------------------------===//
#include "CudaKernels.h"
#include "MatMulBias.h"
#include "zinc/runtime/cuda/CublasLtGemm.h"
#include "zinc/support/MatMulGeometry.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/Twine.h"
#include <climits>
#include <string>

namespace zinc::cuda {

static bool isGemmType(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

static llvm::Error unsupportedType(llvm::StringRef op, DType t) {
  return cudaKernelError("unsupported: " + op + " of " + dtypeName(t) +
                         " on the cuda backend (f32, f16 and bf16 only)");
}

/// Element strides of a dense row-major tensor of shape `in` read at the
/// indices of `out` (numpy's right-aligned broadcast): 0 along the axes it
/// is broadcast over.
static llvm::SmallVector<int64_t, 6>
broadcastStrides(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> out) {
  llvm::SmallVector<int64_t, 6> s(out.size(), 0);
  size_t lead = out.size() - in.size();
  int64_t stride = 1;
  for (size_t d = in.size(); d-- > 0;) {
    s[lead + d] = in[d] == 1 ? 0 : stride;
    stride *= in[d];
  }
  return s;
}

/// The address of element `offset` of a tensor at `base`; null stays null
/// (an empty operand's pointer is never dereferenced).
static const void *elementAt(const void *base, int64_t offset, DType t) {
  return base ? static_cast<const char *>(base) + offset * dtypeSize(t)
              : nullptr;
}

static llvm::Error noGemmContext(llvm::StringRef op) {
  return cudaKernelError(op + ": no cuBLASLt context for the call's stream");
}

//===----------------------------------------------------------------------===//
// MatMul
//===----------------------------------------------------------------------===//

/// op(A) x op(B) * alpha with numpy's batching (MatMulGeometry.h), as the
/// cpu kernel's runProducts computes it.
static llvm::Error runProducts(const CudaKernelCall &call, bool ta, bool tb,
                               double alpha, bool into = false) {
  const DeviceTensor *a = call.input(0), *b = call.input(1);
  // FusedMatMulInto writes its columns of an existing tensor (input 3).
  DeviceTensor *y = into ? call.updated(3) : call.output(0);
  llvm::StringRef op = call.opType;
  if (!a || !b || !y)
    return cudaKernelError(op + ": missing input or output");
  if (a->dtype != b->dtype || a->dtype != y->dtype || a->dtype == DType::Bool)
    return cudaKernelError("unsupported: " + op + " with element types " +
                           dtypeName(a->dtype) + ", " + dtypeName(b->dtype) +
                           " -> " + dtypeName(y->dtype));
  if (!isGemmType(a->dtype))
    return unsupportedType(op, a->dtype);
  auto geometry = fusedMatMulGeometry(a->shape, b->shape, call.attrs);
  if (!geometry)
    return cudaKernelError(op + ": " + llvm::toString(geometry.takeError()));
  const MatMulGeometry &g = *geometry;
  // outColumn (a tile of a wider product, the concat-in-place pass): the
  // product fills columns [outColumn, outColumn + n) of Y's rows.
  int64_t outColumn = call.attrs.getInt("outColumn", 0);
  bool partial = call.attrs.has("outColumn");
  llvm::SmallVector<int64_t, 6> expected(g.out.begin(), g.out.end());
  if (partial && !expected.empty() && !y->shape.empty() && outColumn >= 0 &&
      outColumn + expected.back() <= y->shape.back())
    expected.back() = y->shape.back();
  if (expected != y->shape || (partial && g.out.size() < 1))
    return cudaKernelError(op + ": output shape " + formatShape(y->shape) +
                           (partial ? " cannot hold columns from " +
                                          llvm::Twine(outColumn).str() + " of "
                                    : ", expected ") +
                           formatShape(g.out));
  int64_t m = g.m, n = g.n, k = g.k, rows = g.rows();
  // Y's row stride; the columns start at outColumn.
  int64_t ldy = partial ? y->shape.back() : n;
  // FusedMatMul's optional bias (the fuse-bias pass): every row of Y starts
  // as it, and the products accumulate onto it (beta 1).
  const DeviceTensor *bias = call.input(2);
  if (bias && (bias->dtype != y->dtype || bias->shape.size() != 1 ||
               bias->shape[0] != n || y->shape.empty() || g.out.back() != n))
    return cudaKernelError(op + ": bias " + dtypeName(bias->dtype) +
                           formatShape(bias->shape) +
                           " is not a vector along the output's last axis " +
                           formatShape(y->shape));
  llvm::SmallVector<int64_t, 6> sa =
      broadcastStrides(llvm::makeArrayRef(g.a).drop_back(2), g.batch);
  llvm::SmallVector<int64_t, 6> sb =
      broadcastStrides(llvm::makeArrayRef(g.b).drop_back(2), g.batch);
  for (int64_t &s : sa)
    s *= m * k;
  for (int64_t &s : sb)
    s *= k * n;
  // An operand read through a strided view (shapeX, viewX): its batch
  // strides, its first element, its leading dimension, and whether cuBLASLt
  // reads it transposed from the flag (a view whose rows are contiguous is
  // the transpose of a row-major matrix).
  bool taBlas = ta, tbBlas = tb, viewed = false;
  int64_t aBase = 0, bBase = 0, lda = 0, ldb = 0;
  auto readView = [&](llvm::StringRef which, const DeviceTensor &t,
                      llvm::ArrayRef<int64_t> shape,
                      llvm::SmallVectorImpl<int64_t> &strides, bool &trans,
                      int64_t &base, int64_t &ld) -> llvm::Error {
    if (!call.attrs.has(("view" + which).str()))
      return llvm::Error::success();
    llvm::ArrayRef<int64_t> v = call.attrs.getInts(("view" + which).str());
    size_t r = shape.size();
    if (r < 2 || v.size() != r + 1)
      return cudaKernelError(op + ": view" + which + " needs an offset and " +
                             llvm::Twine(r) + " strides");
    bool transposed = false;
    int64_t leading = 0;
    if (!stridedMatrixLayout(shape[r - 2], shape[r - 1], v[r - 1], v[r],
                             transposed, leading))
      return cudaKernelError("unsupported: " + op + " reading operand " +
                             which + " with strides no BLAS layout has");
    // The view's last element must lie inside the tensor.
    int64_t last = v[0];
    for (size_t d = 0; d < r; ++d)
      last += (shape[d] - 1) * v[d + 1];
    if (v[0] < 0 || (numElements(shape) > 0 && last >= t.numElements()))
      return cudaKernelError(op + ": view" + which + " reads past its " +
                             formatShape(t.shape) + " operand");
    viewed = true;
    base = v[0];
    trans = trans != transposed;
    ld = leading;
    // Batch strides, broadcast to the product's batch (right-aligned).
    llvm::ArrayRef<int64_t> batchDims = shape.drop_back(2);
    size_t lead = g.batch.size() - batchDims.size();
    for (size_t d = 0; d < g.batch.size(); ++d)
      strides[d] = d < lead || batchDims[d - lead] == 1 ? 0 : v[1 + d - lead];
    return llvm::Error::success();
  };
  if (auto err = readView("A", *a, g.a, sa, taBlas, aBase, lda))
    return err;
  if (auto err = readView("B", *b, g.b, sb, tbBlas, bBase, ldb))
    return err;
  // Causal attention's triangles (the triangular-products pass): lowerA
  // and lowerB promise zeros that the whole product multiplies as well;
  // lowerY's zeros above each output's diagonal are written after it.
  bool lowerY = call.attrs.getInt("lowerY", 0) != 0;
  if (int(lowerY) + int(call.attrs.getInt("lowerA", 0) != 0) +
          int(call.attrs.getInt("lowerB", 0) != 0) > 1)
    return cudaKernelError(op + ": sets more than one of lowerA, lowerB, lowerY");
  if (lowerY && (m != n || partial))
    return cudaKernelError(op + ": lowerY needs square products written whole, "
                           "not [" + llvm::Twine(m) + "," + llvm::Twine(n) + "]" +
                           (partial ? " columns of a wider output" : ""));
  // A view's batch is not one tall matrix: one product per batch element
  // (gemm() folds them again when their rows do continue).
  bool folded = g.folded && !viewed;
  if (g.folded && viewed)
    rows = m;
  if (!call.gemm)
    return noGemmContext(op);

  // Everything checked: queue the bias, then the products. An f32 bias
  // rides on the GEMMs as cuBLASLt's epilogue (one pass over Y, not two).
  // Otherwise it is copied into the rows first and the products accumulate
  // onto it: without products to carry it, misaligned, or in f16/bf16,
  // where the epilogue was seen (H200, cuBLASLt 13.0) adding the bias to
  // the already rounded product, a second rounding the cpu does not make.
  bool biasEpilogue = bias && k > 0 && y->dtype == DType::F32 &&
                      reinterpret_cast<uintptr_t>(bias->data) % 16 == 0;
  if (bias && !biasEpilogue && n > 0 && ldy > 0) {
    int64_t yRows = y->numElements() / ldy;
    if (auto err = launchFillRows(
            y->dtype, bias->data, 0, 1,
            const_cast<void *>(elementAt(y->data, outColumn, y->dtype)), yRows,
            n, ldy, call.stream))
      return err;
  }
  int64_t products = folded ? 1 : g.batchElements();
  if (products == 0 || rows == 0 || n == 0)
    return llvm::Error::success();
  // The batch's products, numbered as Y stores them: product p reads A and
  // B at the offsets its batch index gives.
  auto offsets = [&](int64_t p, int64_t &ao, int64_t &bo) {
    ao = aBase;
    bo = bBase;
    if (folded)
      return;
    for (size_t d = g.batch.size(); d-- > 0;) {
      int64_t i = p % g.batch[d];
      p /= g.batch[d];
      ao += i * sa[d];
      bo += i * sb[d];
    }
  };
  // Products in runs of `run` (those of the batch's innermost axes from
  // `first` on) whose offsets step by (strideA, strideB): the longest such
  // run wins. Every run has the same steps, since the outer axes only add
  // a constant to all of its offsets.
  int64_t run = 1, strideA = 0, strideB = 0;
  for (size_t first = 0; !folded && first < g.batch.size(); ++first) {
    int64_t count = 1;
    for (size_t d = first; d < g.batch.size(); ++d)
      count *= g.batch[d];
    if (count <= 1 || count > INT32_MAX)
      continue;
    int64_t a0, b0, a1, b1;
    offsets(0, a0, b0);
    offsets(1, a1, b1);
    int64_t stepA = a1 - a0, stepB = b1 - b0;
    bool uniform = stepA >= 0 && stepB >= 0;
    for (int64_t p = 2; uniform && p < count; ++p) {
      int64_t ao, bo;
      offsets(p, ao, bo);
      uniform = ao == a0 + p * stepA && bo == b0 + p * stepB;
    }
    if (uniform) {
      run = count;
      strideA = stepA;
      strideB = stepB;
      break;
    }
  }

  GemmDesc desc;
  desc.dtype = a->dtype;
  desc.transA = taBlas;
  desc.transB = tbBlas;
  desc.m = rows;
  desc.n = n;
  desc.k = k;
  desc.batch = run;
  desc.strideA = strideA;
  desc.strideB = strideB;
  desc.strideC = rows * ldy;
  desc.lda = lda;
  desc.ldb = ldb;
  desc.ldc = ldy;
  desc.alpha = static_cast<float>(alpha);
  desc.beta = bias && !biasEpilogue ? 1.0f : 0.0f;
  desc.bias = biasEpilogue ? bias->data : nullptr;
  desc.tf32 = call.allowTf32;
  for (int64_t p = 0; p < products; p += run) {
    int64_t ao, bo;
    offsets(p, ao, bo);
    void *yp = const_cast<void *>(
        elementAt(y->data, p * rows * ldy + outColumn, y->dtype));
    if (auto err = gemm(*call.gemm, desc, elementAt(a->data, ao, a->dtype),
                        elementAt(b->data, bo, b->dtype), yp, call.stream))
      return cudaKernelError(op + ": " + llvm::toString(std::move(err)));
  }
  if (lowerY)
    return launchZeroAboveDiagonal(y->dtype, y->data, y->numElements() / (m * n),
                                   m, n, call.stream);
  return llvm::Error::success();
}

llvm::Error runMatMul(const CudaKernelCall &call) {
  return runProducts(call, false, false, 1.0);
}

llvm::Error runFusedMatMul(const CudaKernelCall &call) {
  return runProducts(call, call.attrs.getInt("transA", 0) != 0,
                     call.attrs.getInt("transB", 0) != 0,
                     call.attrs.getFloat("alpha", 1.0));
}

llvm::Error runFusedMatMulInto(const CudaKernelCall &call) {
  return runProducts(call, call.attrs.getInt("transA", 0) != 0,
                     call.attrs.getInt("transB", 0) != 0,
                     call.attrs.getFloat("alpha", 1.0), /*into=*/true);
}

//===----------------------------------------------------------------------===//
// Gemm
//===----------------------------------------------------------------------===//

/// Y = alpha * A' B' + beta * C, with C (optional, unidirectionally
/// broadcast to [M,N]) copied into Y first so cuBLASLt accumulates onto it.
llvm::Error runGemm(const CudaKernelCall &call) {
  const DeviceTensor *a = call.input(0), *b = call.input(1), *c = call.input(2);
  DeviceTensor *y = call.output(0);
  if (!a || !b || !y)
    return cudaKernelError("Gemm: missing input or output");
  DType t = a->dtype;
  if (b->dtype != t || y->dtype != t || (c && c->dtype != t) ||
      t == DType::Bool)
    return cudaKernelError(
        "unsupported: Gemm with mixed or bool element types");
  if (!isGemmType(t))
    return unsupportedType("Gemm", t);
  if (a->shape.size() != 2 || b->shape.size() != 2)
    return cudaKernelError("Gemm: A and B must be 2-D, got " +
                           formatShape(a->shape) + " and " +
                           formatShape(b->shape));
  bool ta = call.attrs.getInt("transA", 0) != 0;
  bool tb = call.attrs.getInt("transB", 0) != 0;
  double alpha = call.attrs.getFloat("alpha", 1.0);
  double beta = call.attrs.getFloat("beta", 1.0);
  int64_t m = ta ? a->shape[1] : a->shape[0];
  int64_t k = ta ? a->shape[0] : a->shape[1];
  int64_t kb = tb ? b->shape[1] : b->shape[0];
  int64_t n = tb ? b->shape[0] : b->shape[1];
  if (k != kb)
    return cudaKernelError("Gemm: inner dimensions " + llvm::Twine(k) +
                           " and " + llvm::Twine(kb) + " differ");
  llvm::SmallVector<int64_t, 6> mn = {m, n};
  if (y->shape != mn)
    return cudaKernelError("Gemm: output shape " + formatShape(y->shape) +
                           ", expected " + formatShape(mn));
  if (c) {
    auto bc = broadcastBatch(c->shape, mn);
    if (!bc || *bc != mn || c->shape.size() > 2) {
      if (!bc)
        llvm::consumeError(bc.takeError());
      return cudaKernelError("Gemm: C of shape " + formatShape(c->shape) +
                             " does not broadcast to " + formatShape(mn));
    }
  }
  if (!call.gemm)
    return noGemmContext("Gemm");
  bool useC = c && beta != 0;
  if (useC) {
    // Strides reading C at Y's [i, j].
    llvm::SmallVector<int64_t, 6> cs = broadcastStrides(c->shape, mn);
    if (auto err = launchFillRows(t, c->data, cs[0], cs[1], y->data, m, n, n,
                                  call.stream))
      return err;
  }
  GemmDesc desc;
  desc.dtype = t;
  desc.transA = ta;
  desc.transB = tb;
  desc.m = m;
  desc.n = n;
  desc.k = k;
  desc.alpha = static_cast<float>(alpha);
  desc.beta = useC ? static_cast<float>(beta) : 0.0f;
  desc.tf32 = call.allowTf32;
  if (auto err = gemm(*call.gemm, desc, a->data, b->data, y->data, call.stream))
    return cudaKernelError("Gemm: " + llvm::toString(std::move(err)));
  return llvm::Error::success();
}

} // namespace zinc::cuda
