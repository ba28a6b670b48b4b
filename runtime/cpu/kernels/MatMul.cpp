//===- MatMul.cpp - MatMul (numpy semantics) and Gemm cpu kernels ---------===//
//
// f32 and f64 products go to OpenBLAS; f16 and bf16 are widened to float,
// multiplied by sgemm and rounded once; integers use a plain loop that wraps
// like numpy. MatMul folds a batch that shares one right-hand matrix into a
// single tall GEMM, the shape of every linear layer.
//
//===----------------------------------------------------------------------===//
#include "Convert.h"
#include "KernelUtil.h"
#include "Kernels.h"
#include "llvm/ADT/Twine.h"
#include <cblas.h>
#include <climits>
#include <vector>

namespace zinc::cpu {

/// Below this many multiply-adds thread start-up costs more than it saves.
static constexpr int64_t kParallelMin = int64_t(1) << 16;

/// One batch element of a product: where its operands and result start.
struct BatchOffsets {
  int64_t a, b, y;
};

static void blasGemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                     float alpha, const float *a, const float *b, float beta,
                     float *y) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
              tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, ta ? m : k, b,
              tb ? k : n, beta, y, n);
}
static void blasGemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                     double alpha, const double *a, const double *b,
                     double beta, double *y) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
              tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, ta ? m : k, b,
              tb ? k : n, beta, y, n);
}

/// y = alpha * op(a) op(b) + beta * y for float or double, through BLAS.
/// BLAS needs nonzero leading dimensions, so an empty K is done here.
template <typename C>
static void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, C alpha,
                 const C *a, const C *b, C beta, C *y) {
  if (m == 0 || n == 0)
    return;
  if (k == 0) {
    for (int64_t i = 0; i < m * n; ++i)
      y[i] = beta == C(0) ? C(0) : beta * y[i];
    return;
  }
  blasGemm(ta, tb, m, n, k, alpha, a, b, beta, y);
}

/// Integer product, y = op(a) op(b) with wrapping arithmetic, over threads
/// by output row.
template <typename T>
static void intGemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                    const T *a, const T *b, T *y) {
  using W = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned,
                               std::make_unsigned_t<T>>;
#pragma omp parallel for schedule(static) if (m * n * k >= kParallelMin)
  for (int64_t i = 0; i < m; ++i) {
    std::vector<W> acc(n, 0);
    for (int64_t p = 0; p < k; ++p) {
      W av = static_cast<W>(ta ? a[p * m + i] : a[i * k + p]);
      if (tb)
        for (int64_t j = 0; j < n; ++j)
          acc[j] += av * static_cast<W>(b[j * k + p]);
      else
        for (int64_t j = 0; j < n; ++j)
          acc[j] += av * static_cast<W>(b[p * n + j]);
    }
    for (int64_t j = 0; j < n; ++j)
      y[i * n + j] = static_cast<T>(acc[j]);
  }
}

/// Widens a 16-bit float tensor to float for sgemm.
template <typename T> static std::vector<float> widen(const TensorRef &t) {
  std::vector<float> out(t.numElements());
  const T *p = t.as<const T>();
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = load(p[i]);
  return out;
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

llvm::Error runMatMul(const KernelCall &call) {
  const TensorRef *a = call.input(0), *b = call.input(1);
  TensorRef *y = call.output(0);
  if (!a || !b || !y)
    return kernelError("MatMul: missing input or output");
  if (a->dtype != b->dtype || a->dtype != y->dtype || a->dtype == DType::Bool)
    return kernelError("unsupported: MatMul with element types " +
                       dtypeName(a->dtype) + ", " + dtypeName(b->dtype) +
                       " -> " + dtypeName(y->dtype));
  if (a->rank() == 0 || b->rank() == 0)
    return kernelError("MatMul: operands must have rank >= 1");
  // numpy: a 1-D left operand is a row [1,K], a 1-D right one a column
  // [K,1]; the added dimension is dropped from the result.
  llvm::SmallVector<int64_t, 6> as(a->shape), bs(b->shape);
  bool rowVec = as.size() == 1, colVec = bs.size() == 1;
  if (rowVec)
    as.insert(as.begin(), 1);
  if (colVec)
    bs.push_back(1);
  int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  if (bs[bs.size() - 2] != k)
    return kernelError("MatMul: shapes " + formatShape(a->shape) + " and " +
                       formatShape(b->shape) + " do not multiply");
  llvm::ArrayRef<int64_t> batchA = llvm::makeArrayRef(as).drop_back(2);
  llvm::ArrayRef<int64_t> batchB = llvm::makeArrayRef(bs).drop_back(2);
  auto batchOr = broadcastShapes(batchA, batchB);
  if (!batchOr)
    return batchOr.takeError();
  llvm::SmallVector<int64_t, 6> batch = *batchOr, expect = *batchOr;
  if (!rowVec)
    expect.push_back(m);
  if (!colVec)
    expect.push_back(n);
  if (expect != y->shape)
    return kernelError("MatMul: output shape " + formatShape(y->shape) +
                       ", expected " + formatShape(expect));
  if (auto err = checkBlasDims(call, {m, n, k}))
    return err;

  // The offsets of every batch element. When the right operand is one
  // matrix, the whole batch of the left is one tall [batch*M, K] product.
  std::vector<BatchOffsets> items;
  int64_t rows = m;
  if (zinc::numElements(batchB) == 1 &&
      zinc::numElements(batchA) == zinc::numElements(batch)) {
    rows = m * zinc::numElements(batch);
    if (auto err = checkBlasDims(call, {rows}))
      return err;
    items.push_back({0, 0, 0});
  } else {
    llvm::SmallVector<int64_t, 6> sa = broadcastStrides(batchA, batch);
    llvm::SmallVector<int64_t, 6> sb = broadcastStrides(batchB, batch);
    for (int64_t &s : sa)
      s *= m * k;
    for (int64_t &s : sb)
      s *= k * n;
    int64_t yOff = 0;
    forEachStrided<2>(batch, {sa, sb}, [&](const std::array<int64_t, 2> &o) {
      items.push_back({o[0], o[1], yOff});
      yOff += m * n;
    });
  }

  return visitDType(a->dtype, [&](auto tag) -> llvm::Error {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      const T *pa = a->as<const T>(), *pb = b->as<const T>();
      for (const BatchOffsets &it : items)
        gemm<T>(false, false, rows, n, k, 1, pa + it.a, pb + it.b, 0,
                y->as<T>() + it.y);
    } else if constexpr (isFloatStorage<T>()) {
      std::vector<float> fa = widen<T>(*a), fb = widen<T>(*b);
      std::vector<float> fy(y->numElements());
      for (const BatchOffsets &it : items)
        gemm<float>(false, false, rows, n, k, 1, fa.data() + it.a,
                    fb.data() + it.b, 0, fy.data() + it.y);
      T *py = y->as<T>();
      for (size_t i = 0; i < fy.size(); ++i)
        py[i] = store<T>(fy[i]);
    } else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      const T *pa = a->as<const T>(), *pb = b->as<const T>();
      for (const BatchOffsets &it : items)
        intGemm<T>(false, false, rows, n, k, pa + it.a, pb + it.b,
                   y->as<T>() + it.y);
    }
    return llvm::Error::success();
  });
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
    if constexpr (isFloatStorage<T>()) {
      // Float and double run in place; the 16-bit floats in a float copy.
      using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
      constexpr bool inPlace = std::is_same_v<T, C>;
      std::vector<float> fa, fb, fy;
      const C *pa, *pb;
      C *py;
      if constexpr (inPlace) {
        pa = a->as<const C>();
        pb = b->as<const C>();
        py = y->as<C>();
      } else {
        fa = widen<T>(*a);
        fb = widen<T>(*b);
        fy.resize(m * n);
        pa = fa.data();
        pb = fb.data();
        py = fy.data();
      }
      if (useC) {
        const T *pc = c->as<const T>();
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j)
            py[i * n + j] = static_cast<C>(load(pc[i * cs[0] + j * cs[1]]));
      }
      gemm<C>(ta, tb, m, n, k, static_cast<C>(alpha), pa, pb,
              useC ? static_cast<C>(beta) : C(0), py);
      if constexpr (!inPlace) {
        T *out = y->as<T>();
        for (int64_t i = 0; i < m * n; ++i)
          out[i] = store<T>(fy[i]);
      }
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
