//===- MatMul.cpp - MatMul (numpy semantics) and Gemm cpu kernels ---------===//
//
// f32 and f64 products go to OpenBLAS; f16 and bf16 are widened to float a
// block at a time into the call's workspace (KernelWorkspace.h sizes the
// blocks), multiplied by sgemm and rounded once; integers use a plain loop
// that wraps like numpy. MatMul folds a batch that shares one right-hand
// matrix into a single tall GEMM, the shape of every linear layer.
// zinc.FusedMatMul is MatMul reading either operand transposed (its last two
// axes swapped) and scaling by alpha: BLAS's own transA/transB; or reading
// an operand flattened to a matrix (flattenA/flattenB), which are the same
// bytes; and, with a third input, starting from a bias along the output's
// last axis (Y = bias + op(A) op(B)); and, marked by the
// triangular-products pass, skipping causal attention's zero triangles
// (lowerA, lowerB, lowerY: TriangularGemm.h).
//
//===----------------------------------------------------------------------===//
#include "Convert.h"
#include "KernelUtil.h"
#include "Kernels.h"
#include "TeamGemm.h"
#include "TriangularGemm.h"
#include "zinc/support/MatMulGeometry.h"
#include "llvm/ADT/Twine.h"
#include <algorithm>
#include <climits>
#include <cstring>
#include <omp.h>

namespace zinc::cpu {

/// Below this many multiply-adds thread start-up costs more than it saves.
static constexpr int64_t kParallelMin = int64_t(1) << 16;

/// Zeros y's entries above its diagonal (lowerY): all-zero bits are zero
/// in every element type.
template <typename T>
static void zeroAboveDiagonal(T *y, int64_t m, int64_t n, int64_t ldy) {
  for (int64_t i = 0; i < m && i + 1 < n; ++i)
    std::memset(static_cast<void *>(y + i * ldy + i + 1), 0,
                (n - i - 1) * sizeof(T));
}

/// y = alpha * op(a) op(b) + beta * y for float or double, through BLAS on
/// the OpenMP team (TeamGemm.h), or on this thread when `onThisThread`;
/// lda and ldb default to the operands' packed widths.
/// BLAS needs nonzero leading dimensions, so an empty K is done here.
/// With a triangle (the triangular-products pass), f32 goes to
/// TriangularGemm on this thread; f64 multiplies whole (the zeros it
/// reads are zeros) and zeros above the diagonal for LowerY.
template <typename C>
static void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, C alpha,
                 const C *a, const C *b, C beta, C *y,
                 bool onThisThread = false, int64_t lda = 0, int64_t ldb = 0,
                 int64_t ldy = 0, Triangle triangle = Triangle::None) {
  if (m == 0 || n == 0)
    return;
  if (!ldy)
    ldy = n;
  if constexpr (std::is_same_v<C, float>) {
    if (triangle != Triangle::None) {
      triangularGemm(GemmArgs<float>::make(ta, tb, m, n, k, alpha, a,
                                           lda ? lda : (ta ? m : k), b,
                                           ldb ? ldb : (tb ? k : n), beta, y,
                                           ldy),
                     triangle);
      return;
    }
  }
  if (triangle == Triangle::LowerY) {
    gemm<C>(ta, tb, m, n, k, alpha, a, b, beta, y, onThisThread, lda, ldb, ldy);
    zeroAboveDiagonal(y, m, n, ldy);
    return;
  }
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        y[i * ldy + j] = beta == C(0) ? C(0) : beta * y[i * ldy + j];
    return;
  }
  auto g = GemmArgs<C>::make(ta, tb, m, n, k, alpha, a,
                             lda ? lda : (ta ? m : k), b,
                             ldb ? ldb : (tb ? k : n), beta, y, ldy);
  if (onThisThread)
    gemmOnThisThread(g);
  else
    teamGemm(g);
}

/// Integer product, y = op(a) op(b) with wrapping arithmetic, over threads
/// by output row. Each row accumulates in y itself: arithmetic modulo 2^32
/// (or 2^64) truncated to T's width is arithmetic modulo T's width, so
/// storing after every step changes nothing.
template <typename T>
static void intGemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                    const T *a, const T *b, T *y) {
  using W = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned,
                               std::make_unsigned_t<T>>;
  parallelFor(m, m * n * k >= kParallelMin, [&](int64_t i) {
    T *row = y + i * n;
    std::fill(row, row + n, T(0));
    for (int64_t p = 0; p < k; ++p) {
      W av = static_cast<W>(ta ? a[p * m + i] : a[i * k + p]);
      if (tb)
        for (int64_t j = 0; j < n; ++j)
          row[j] = static_cast<T>(static_cast<W>(row[j]) +
                                  av * static_cast<W>(b[j * k + p]));
      else
        for (int64_t j = 0; j < n; ++j)
          row[j] = static_cast<T>(static_cast<W>(row[j]) +
                                  av * static_cast<W>(b[p * n + j]));
    }
  });
}

/// The f32 blocks of a 16-bit GEMM, taken from the call's workspace in the
/// order and sizes kernelWorkspaceBytes counts them.
struct WidenedBlocks {
  float *a = nullptr, *b = nullptr, *y = nullptr;
};

static llvm::Expected<WidenedBlocks>
takeWidenedBlocks(const KernelCall &call, int64_t m, int64_t n, int64_t k) {
  int64_t bm = std::min(m, kWidenBlockM), bn = std::min(n, kWidenBlockN),
          bk = std::min(k, kWidenBlockK);
  WidenedBlocks w;
  auto a = call.scratch<float>(bm * bk);
  if (!a)
    return a.takeError();
  auto b = call.scratch<float>(bk * bn);
  if (!b)
    return b.takeError();
  auto y = call.scratch<float>(bm * bn);
  if (!y)
    return y.takeError();
  w.a = *a;
  w.b = *b;
  w.y = *y;
  return w;
}

/// y[m,n] = alpha * op(a) op(b) + beta * C for a 16-bit float T, in f32
/// blocks: each block of Y starts as beta * C (zero without `useC`),
/// accumulates the products of widened blocks of A and B (sgemm, beta 1)
/// and is rounded once into y. `c(i, j)` reads C at Y's [i, j].
template <typename T, typename CFn>
static void widenedGemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                        float alpha, const T *a, const T *b, float beta,
                        CFn &&c, bool useC, T *y, const WidenedBlocks &w,
                        int64_t ldy = 0) {
  if (!ldy)
    ldy = n;
  for (int64_t i0 = 0; i0 < m; i0 += kWidenBlockM) {
    int64_t mb = std::min(kWidenBlockM, m - i0);
    for (int64_t j0 = 0; j0 < n; j0 += kWidenBlockN) {
      int64_t nb = std::min(kWidenBlockN, n - j0);
      for (int64_t i = 0; i < mb; ++i)
        for (int64_t j = 0; j < nb; ++j)
          w.y[i * nb + j] = useC ? beta * c(i0 + i, j0 + j) : 0.0f;
      for (int64_t p0 = 0; p0 < k; p0 += kWidenBlockK) {
        int64_t kb = std::min(kWidenBlockK, k - p0);
        for (int64_t i = 0; i < mb; ++i)
          for (int64_t p = 0; p < kb; ++p)
            w.a[i * kb + p] =
                load(ta ? a[(p0 + p) * m + i0 + i] : a[(i0 + i) * k + p0 + p]);
        for (int64_t p = 0; p < kb; ++p)
          for (int64_t j = 0; j < nb; ++j)
            w.b[p * nb + j] =
                load(tb ? b[(j0 + j) * k + p0 + p] : b[(p0 + p) * n + j0 + j]);
        gemm<float>(false, false, mb, nb, kb, alpha, w.a, w.b, 1.0f, w.y);
      }
      for (int64_t i = 0; i < mb; ++i)
        for (int64_t j = 0; j < nb; ++j)
          y[(i0 + i) * ldy + j0 + j] = store<T>(w.y[i * nb + j]);
    }
  }
}

static llvm::Error checkBlasDims(const KernelCall &call,
                                 std::initializer_list<int64_t> dims) {
  for (int64_t d : dims)
    if (d > INT_MAX)
      return kernelError("unsupported: " + call.opType + " with dimension " +
                         llvm::Twine(d) + " beyond BLAS's 32-bit sizes");
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// MatMul
//===----------------------------------------------------------------------===//

/// op(A) x op(B) * alpha with numpy's batching (MatMulGeometry.h): one
/// GEMM per broadcast batch element at the offsets the broadcast gives, or a
/// single tall one when the batch shares one right-hand matrix.
static llvm::Error runProducts(const KernelCall &call, bool ta, bool tb,
                               double alpha, bool into = false) {
  const TensorRef *a = call.input(0), *b = call.input(1);
  // FusedMatMulInto writes its columns of an existing tensor (input 3).
  TensorRef *y = into ? call.updated(3) : call.output(0);
  llvm::StringRef op = call.opType;
  if (!a || !b || !y)
    return kernelError(op + ": missing input or output");
  if (a->dtype != b->dtype || a->dtype != y->dtype || a->dtype == DType::Bool)
    return kernelError("unsupported: " + op + " with element types " +
                       dtypeName(a->dtype) + ", " + dtypeName(b->dtype) +
                       " -> " + dtypeName(y->dtype));
  // MatMul has none of FusedMatMul's attributes, so this is numpy's matmul
  // for it.
  auto geometry = fusedMatMulGeometry(a->shape, b->shape, call.attrs);
  if (!geometry)
    return kernelError(op + ": " + llvm::toString(geometry.takeError()));
  const MatMulGeometry &g = *geometry;
  // outColumn (a tile of a wider product, the concat-in-place pass): the
  // product fills columns [outColumn, outColumn + n) of Y's rows.
  int64_t outColumn = call.attrs.getInt("outColumn", 0);
  bool partial = call.attrs.has("outColumn");
  llvm::SmallVector<int64_t, 6> expected(g.out.begin(), g.out.end());
  if (partial && !expected.empty() && !y->shape.empty() &&
      outColumn >= 0 && outColumn + expected.back() <= y->shape.back())
    expected.back() = y->shape.back();
  if (expected != y->shape || (partial && g.out.size() < 1))
    return kernelError(op + ": output shape " + formatShape(y->shape) +
                       (partial ? " cannot hold columns from " +
                                      llvm::Twine(outColumn).str() + " of "
                                : ", expected ") +
                       formatShape(g.out));
  int64_t m = g.m, n = g.n, k = g.k, rows = g.rows();
  // Y's row stride; the columns start at outColumn.
  int64_t ldy = partial ? y->shape.back() : n;
  if (auto err = checkBlasDims(call, {m, n, k, rows}))
    return err;
  // FusedMatMul's optional bias (the fuse-bias pass): every row of Y starts
  // as it, and the products accumulate onto it (beta 1).
  const TensorRef *bias = call.input(2);
  if (bias && (bias->dtype != y->dtype || bias->rank() != 1 ||
               bias->shape[0] != n || y->shape.empty() ||
               g.out.back() != n))
    return kernelError(op + ": bias " + dtypeName(bias->dtype) +
                       formatShape(bias->shape) + " is not a vector along the "
                       "output's last axis " + formatShape(y->shape));
  if (bias && !isFloatDType(y->dtype))
    return kernelError("unsupported: " + op + " of integers with a bias");
  llvm::SmallVector<int64_t, 6> sa =
      broadcastStrides(llvm::makeArrayRef(g.a).drop_back(2), g.batch);
  llvm::SmallVector<int64_t, 6> sb =
      broadcastStrides(llvm::makeArrayRef(g.b).drop_back(2), g.batch);
  for (int64_t &s : sa)
    s *= m * k;
  for (int64_t &s : sb)
    s *= k * n;
  // An operand read through a strided view (shapeX, viewX): its batch
  // strides, its first element, its leading dimension, and whether BLAS
  // reads it transposed from the flag (a view whose rows are contiguous
  // is the transpose of a row-major matrix).
  bool taBlas = ta, tbBlas = tb, viewed = false;
  int64_t aBase = 0, bBase = 0, lda = 0, ldb = 0;
  auto readView = [&](llvm::StringRef which, const TensorRef &t,
                      llvm::ArrayRef<int64_t> shape,
                      llvm::SmallVectorImpl<int64_t> &strides, bool &trans,
                      int64_t &base, int64_t &ld) -> llvm::Error {
    if (!call.attrs.has(("view" + which).str()))
      return llvm::Error::success();
    llvm::ArrayRef<int64_t> v = call.attrs.getInts(("view" + which).str());
    size_t r = shape.size();
    if (r < 2 || v.size() != r + 1)
      return kernelError(op + ": view" + which + " needs an offset and " +
                         llvm::Twine(r) + " strides");
    bool transposed = false;
    int64_t leading = 0;
    if (!stridedMatrixLayout(shape[r - 2], shape[r - 1], v[r - 1], v[r],
                             transposed, leading))
      return kernelError("unsupported: " + op + " reading operand " + which +
                         " with strides no BLAS layout has");
    // The view's last element must lie inside the tensor.
    int64_t last = v[0];
    for (size_t d = 0; d < r; ++d)
      last += (shape[d] - 1) * v[d + 1];
    if (v[0] < 0 || (numElements(shape) > 0 && last >= t.numElements()))
      return kernelError(op + ": view" + which + " reads past its " +
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
  if (viewed && a->dtype != DType::F32 && a->dtype != DType::F64)
    return kernelError("unsupported: " + op + " reading a strided view of " +
                       dtypeName(a->dtype));
  // Causal attention's known zeros (TriangularGemm.h): lowerA and lowerB
  // name the operand as stored, so a transposed one is upper triangular.
  Triangle triangle = Triangle::None;
  if (!triangleOf(call.attrs.getInt("lowerA", 0) != 0,
                  call.attrs.getInt("lowerB", 0) != 0,
                  call.attrs.getInt("lowerY", 0) != 0, ta, tb, triangle))
    return kernelError(op + ": sets more than one of lowerA, lowerB, lowerY");
  if (!triangleFits(triangle, m, n, k))
    return kernelError(op + ": lowerA, lowerB or lowerY needs square matrices, "
                       "not a [" + llvm::Twine(m) + "," + llvm::Twine(k) +
                       "] x [" + llvm::Twine(k) + "," + llvm::Twine(n) +
                       "] product");
  // A view's batch, or a triangular one, is not one tall matrix: one GEMM
  // per product.
  bool perMatrix = viewed || triangle != Triangle::None;
  bool folded = g.folded && !perMatrix;
  if (g.folded && perMatrix)
    rows = m;
  // The batch's products, numbered as Y stores them: product p reads A
  // and B at the offsets its batch index gives.
  int64_t products = folded ? 1 : g.batchElements();
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
  // Calls fn(aOffset, bOffset, yOffset) for every product.
  auto forEachProduct = [&](auto &&fn) {
    for (int64_t p = 0; p < products; ++p) {
      int64_t ao, bo;
      offsets(p, ao, bo);
      fn(ao, bo, p * m * ldy + outColumn);
    }
  };

  return visitDType(a->dtype, [&](auto tag) -> llvm::Error {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      const T *pa = a->as<const T>(), *pb = b->as<const T>();
      T *py = y->as<T>();
      T beta = 0;
      if (bias && n > 0) {
        const T *pbias = bias->as<const T>();
        int64_t yRows = y->numElements() / ldy;
        parallelFor(yRows, yRows * n >= kParallelMin, [&](int64_t r) {
          std::copy(pbias, pbias + n, py + r * ldy + outColumn);
        });
        beta = 1;
      }
      // A batch of at least one product per thread runs whole products on
      // each thread (attention's heads); fewer products split each one.
      bool perProduct = products >= omp_get_max_threads() &&
                        useThreads(products * rows * n * k >= kParallelMin);
      if (perProduct) {
        parallelFor(products, true, [&](int64_t p) {
          int64_t ao, bo;
          offsets(p, ao, bo);
          gemm<T>(taBlas, tbBlas, rows, n, k, static_cast<T>(alpha), pa + ao,
                  pb + bo, beta, py + p * rows * ldy + outColumn,
                  /*onThisThread=*/true, lda, ldb, ldy, triangle);
        });
      } else {
        forEachProduct([&](int64_t ao, int64_t bo, int64_t yo) {
          gemm<T>(taBlas, tbBlas, rows, n, k, static_cast<T>(alpha), pa + ao,
                  pb + bo, beta, py + yo, false, lda, ldb, ldy, triangle);
        });
      }
    } else if constexpr (isFloatStorage<T>()) {
      if (rows == 0 || n == 0)
        return llvm::Error::success();
      auto blocks = takeWidenedBlocks(call, rows, n, k);
      if (!blocks)
        return blocks.takeError();
      const T *pa = a->as<const T>(), *pb = b->as<const T>();
      const T *pbias = bias ? bias->as<const T>() : nullptr;
      auto readBias = [&](int64_t, int64_t j) {
        return pbias ? static_cast<float>(load(pbias[j])) : 0.0f;
      };
      forEachProduct([&](int64_t ao, int64_t bo, int64_t yo) {
        widenedGemm<T>(ta, tb, rows, n, k, static_cast<float>(alpha), pa + ao,
                       pb + bo, 1.0f, readBias, bias != nullptr,
                       y->as<T>() + yo, *blocks, ldy);
        if (triangle == Triangle::LowerY)
          zeroAboveDiagonal(y->as<T>() + yo, rows, n, ldy);
      });
    } else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      if (alpha != 1)
        return kernelError("unsupported: " + op + " of integers with alpha " +
                           std::to_string(alpha));
      const T *pa = a->as<const T>(), *pb = b->as<const T>();
      if (partial)
        return kernelError("unsupported: " + op + " of integers into columns");
      forEachProduct([&](int64_t ao, int64_t bo, int64_t yo) {
        intGemm<T>(ta, tb, rows, n, k, pa + ao, pb + bo, y->as<T>() + yo);
        if (triangle == Triangle::LowerY)
          zeroAboveDiagonal(y->as<T>() + yo, rows, n, n);
      });
    }
    return llvm::Error::success();
  });
}

llvm::Error runMatMul(const KernelCall &call) {
  return runProducts(call, false, false, 1.0);
}

llvm::Error runFusedMatMul(const KernelCall &call) {
  return runProducts(call, call.attrs.getInt("transA", 0) != 0,
                     call.attrs.getInt("transB", 0) != 0,
                     call.attrs.getFloat("alpha", 1.0));
}

llvm::Error runFusedMatMulInto(const KernelCall &call) {
  return runProducts(call, call.attrs.getInt("transA", 0) != 0,
                     call.attrs.getInt("transB", 0) != 0,
                     call.attrs.getFloat("alpha", 1.0), /*into=*/true);
}

//===----------------------------------------------------------------------===//
// Gemm
//===----------------------------------------------------------------------===//

/// Y = alpha * A' B' + beta * C, with C (optional, unidirectionally
/// broadcast to [M,N]) copied into Y first so BLAS can accumulate onto it.
llvm::Error runGemm(const KernelCall &call) {
  const TensorRef *a = call.input(0), *b = call.input(1), *c = call.input(2);
  TensorRef *y = call.output(0);
  if (!a || !b || !y)
    return kernelError("Gemm: missing input or output");
  DType t = a->dtype;
  if (b->dtype != t || y->dtype != t || (c && c->dtype != t) ||
      t == DType::Bool)
    return kernelError("unsupported: Gemm with mixed or bool element types");
  if (a->rank() != 2 || b->rank() != 2)
    return kernelError("Gemm: A and B must be 2-D, got " +
                       formatShape(a->shape) + " and " + formatShape(b->shape));
  bool ta = call.attrs.getInt("transA", 0) != 0;
  bool tb = call.attrs.getInt("transB", 0) != 0;
  double alpha = call.attrs.getFloat("alpha", 1.0);
  double beta = call.attrs.getFloat("beta", 1.0);
  int64_t m = ta ? a->shape[1] : a->shape[0];
  int64_t k = ta ? a->shape[0] : a->shape[1];
  int64_t kb = tb ? b->shape[1] : b->shape[0];
  int64_t n = tb ? b->shape[0] : b->shape[1];
  if (k != kb)
    return kernelError("Gemm: inner dimensions " + llvm::Twine(k) + " and " +
                       llvm::Twine(kb) + " differ");
  llvm::SmallVector<int64_t, 2> mn = {m, n};
  if (y->shape != mn)
    return kernelError("Gemm: output shape " + formatShape(y->shape) +
                       ", expected " + formatShape(mn));
  if (c) {
    auto bc = broadcastShapes(c->shape, mn);
    if (!bc || *bc != mn || c->rank() > 2) {
      if (!bc)
        llvm::consumeError(bc.takeError());
      return kernelError("Gemm: C of shape " + formatShape(c->shape) +
                         " does not broadcast to " + formatShape(mn));
    }
  }
  if (auto err = checkBlasDims(call, {m, n, k}))
    return err;
  bool useC = c && beta != 0;
  // Strides reading C at Y's [i, j].
  llvm::SmallVector<int64_t, 6> cs =
      c ? broadcastStrides(c->shape, mn) : llvm::SmallVector<int64_t, 6>{0, 0};

  return visitDType(t, [&](auto tag) -> llvm::Error {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      // BLAS accumulates onto C copied into Y.
      T *py = y->as<T>();
      if (useC) {
        const T *pc = c->as<const T>();
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j)
            py[i * n + j] = pc[i * cs[0] + j * cs[1]];
      }
      gemm<T>(ta, tb, m, n, k, static_cast<T>(alpha), a->as<const T>(),
              b->as<const T>(), useC ? static_cast<T>(beta) : T(0), py);
    } else if constexpr (isFloatStorage<T>()) {
      // The 16-bit floats in f32 blocks of the workspace.
      if (m == 0 || n == 0)
        return llvm::Error::success();
      auto blocks = takeWidenedBlocks(call, m, n, k);
      if (!blocks)
        return blocks.takeError();
      const T *pc = useC ? c->as<const T>() : nullptr;
      auto readC = [&](int64_t i, int64_t j) {
        return static_cast<float>(load(pc[i * cs[0] + j * cs[1]]));
      };
      widenedGemm<T>(ta, tb, m, n, k, static_cast<float>(alpha),
                     a->as<const T>(), b->as<const T>(),
                     static_cast<float>(beta), readC, useC, y->as<T>(),
                     *blocks);
    } else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      T *py = y->as<T>();
      intGemm<T>(ta, tb, m, n, k, a->as<const T>(), b->as<const T>(), py);
      // Integer Gemm keeps exact integers when alpha and beta are 1; other
      // scales go through double and truncate, as a cast would.
      const T *pc = useC ? c->as<const T>() : nullptr;
      bool exact = alpha == 1 && (!useC || beta == 1);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          T &v = py[i * n + j];
          T cv = pc ? pc[i * cs[0] + j * cs[1]] : T(0);
          using U = std::make_unsigned_t<T>;
          if (exact)
            v = static_cast<T>(static_cast<U>(v) + static_cast<U>(cv));
          else
            v = convertValue<T>(alpha * static_cast<double>(v) +
                                (pc ? beta * static_cast<double>(cv) : 0.0));
        }
    }
    return llvm::Error::success();
  });
}

} // namespace zinc::cpu
