//===- Attention.cpp - zinc.Attention and its gradient on the cpu ---------===//
//
// FlashAttention-2's algorithm (zinc/support/AttentionOp.h has the op's
// definition): the forward walks each block of query rows across the key
// blocks with an online softmax (a running row maximum m and sum l, the
// accumulator rescaled by exp(m_old - m_new) when the maximum grows) and
// keeps LSE = m + log l per row; the backward rebuilds P = exp(S - LSE) a
// tile at a time. No [Tq, Tk] matrix exists beyond a tile on the stack.
//
// The backward is FlashAttention-2's single pass per head where a thread
// can own whole heads (f32 and f64, at least as many heads as threads, no
// trained bias): key blocks outer, dKt and dV accumulated in tiles, dQ
// added into the output. Otherwise it runs in two passes: pass A owns a key
// block (its dKt and dV columns) and walks every query block; pass B owns a
// query block (its dQ rows, and the bias gradient's rows) and walks every
// key block. Each recomputes S and dP, 40% more products than one pass, but
// every thread writes only what it owns: deterministic, no atomics, no
// scratch beyond tiles.
//
// Tiles multiply through BLAS on the calling thread (f32 or f64); f16 and
// bf16 operands are widened a tile at a time. Work units are (head, block)
// pairs over the OpenMP team.
//
//===----------------------------------------------------------------------===//
#include "KernelUtil.h"
#include "Kernels.h"
#include "TeamGemm.h"
#include "zinc/runtime/cpu/RowMath.h"
#include "zinc/runtime/comm/Communicator.h"
#include "zinc/support/AttentionOp.h"
#include "zinc/support/Philox.h"
#include "llvm/ADT/Twine.h"
#include <algorithm>
#include <cmath>
#include <limits>

using llvm::Error;
using llvm::Twine;

namespace zinc::cpu {
namespace {
using namespace zinc::attention;

/// Rows (and columns) of a tile: 64 in f32, 32 in f64, so that a thread's
/// tiles and accumulators at the widest head stay under a megabyte of stack.
template <typename C> constexpr int64_t kBlock = sizeof(C) == 4 ? 64 : 32;

struct Dims {
  int64_t heads = 1; // product of the leading axes
  int64_t tq = 0, tk = 0, d = 0, dv = 0;
};

/// Where a mask or bias operand broadcast to [..., Tq, Tk] keeps the
/// element of head h, row i, column j.
struct Broadcast {
  llvm::SmallVector<int64_t, 6> headDims, headStrides;
  int64_t rowStride = 0, colStride = 0;
  bool present = false;

  int64_t headBase(int64_t h) const {
    int64_t base = 0;
    for (size_t k = headDims.size(); k-- > 0;) {
      base += (h % headDims[k]) * headStrides[k];
      h /= headDims[k];
    }
    return base;
  }
  /// The operand's index of the heads' first element: equal for heads that
  /// share their [Tq, Tk] matrix of it.
  int64_t offset(int64_t base, int64_t i, int64_t j) const {
    return base + i * rowStride + j * colStride;
  }
};

llvm::Expected<Broadcast> broadcastOf(const KernelCall &call, const TensorRef *t,
                                      llvm::ArrayRef<int64_t> lead, const Dims &dims,
                                      const char *what) {
  Broadcast b;
  if (!t)
    return b;
  b.present = true;
  llvm::SmallVector<int64_t, 8> full(lead.begin(), lead.end());
  full.push_back(dims.tq);
  full.push_back(dims.tk);
  int64_t rank = static_cast<int64_t>(full.size()), own = t->rank();
  if (own > rank)
    return kernelError(call.opType + ": " + what + " shape " + formatShape(t->shape) +
                       " has more axes than the scores'");
  llvm::SmallVector<int64_t, 8> strides(rank, 0);
  int64_t stride = 1;
  for (int64_t k = rank - 1; k >= 0; --k) {
    int64_t ownAxis = k - (rank - own);
    int64_t size = ownAxis >= 0 ? t->shape[ownAxis] : 1;
    if (size != 1 && size != full[k])
      return kernelError(call.opType + ": " + what + " shape " + formatShape(t->shape) +
                         " does not broadcast to the scores' " + formatShape(full));
    strides[k] = size == 1 ? 0 : stride;
    stride *= size;
  }
  b.headDims.assign(lead.begin(), lead.end());
  b.headStrides.assign(strides.begin(), strides.end() - 2);
  b.rowStride = strides[rank - 2];
  b.colStride = strides[rank - 1];
  return b;
}

/// The call's attributes and operands, checked.
template <typename T> struct Problem {
  using C = ComputeT<T>;
  Dims dims;
  Broadcast mask, bias;
  const T *q = nullptr, *kt = nullptr, *v = nullptr, *biasData = nullptr;
  const bool *maskData = nullptr;
  C scale = 1, fill = 0;
  bool causal = false;
  float ratio = 0;
  uint32_t seedId = 0;
  uint64_t seed = 0, dropOffset = 0;
  int64_t step = 0;

  /// Score columns j of row i are in when j <= i + Tk - Tq under causal.
  int64_t columnsEnd(int64_t rowEnd) const {
    return causal ? std::clamp<int64_t>(rowEnd + dims.tk - dims.tq, 0, dims.tk) : dims.tk;
  }
  int64_t rowsBegin(int64_t col) const {
    return causal ? std::clamp<int64_t>(col - (dims.tk - dims.tq), 0, dims.tq) : 0;
  }
  C dropScale() const { return C(1) / (C(1) - C(ratio)); }
};

Error checkOperands(const KernelCall &call, Dims &dims,
                    llvm::SmallVectorImpl<int64_t> &lead) {
  const TensorRef *q = call.input(kQ), *kt = call.input(kKt), *v = call.input(kV);
  if (!q || !kt || !v)
    return kernelError(call.opType + ": Q, Kt and V are required");
  if (q->rank() < 2 || kt->rank() != q->rank() || v->rank() != q->rank())
    return kernelError(call.opType + ": Q, Kt and V must have one rank, at least 2 (" +
                       formatShape(q->shape) + ", " + formatShape(kt->shape) + ", " +
                       formatShape(v->shape) + ")");
  int64_t r = q->rank();
  lead.assign(q->shape.begin(), q->shape.end() - 2);
  for (const TensorRef *t : {kt, v})
    if (!std::equal(lead.begin(), lead.end(), t->shape.begin()))
      return kernelError(call.opType + ": Q, Kt and V differ in their leading axes (" +
                         formatShape(q->shape) + ", " + formatShape(kt->shape) + ", " +
                         formatShape(v->shape) + ")");
  dims.heads = zinc::numElements(lead);
  dims.tq = q->shape[r - 2];
  dims.d = q->shape[r - 1];
  dims.tk = kt->shape[r - 1];
  dims.dv = v->shape[r - 1];
  if (kt->shape[r - 2] != dims.d || v->shape[r - 2] != dims.tk)
    return kernelError(call.opType + ": Kt must be [..., D, Tk] and V [..., Tk, Dv] for Q [..., Tq, D] (" +
                       formatShape(q->shape) + ", " + formatShape(kt->shape) + ", " +
                       formatShape(v->shape) + ")");
  if (dims.d > kMaxHeadDim || dims.dv > kMaxHeadDim)
    return kernelError(call.opType + ": head dimensions " + Twine(dims.d) + " and " +
                       Twine(dims.dv) + " exceed the kernel's " + Twine(kMaxHeadDim));
  if (!isFloatDType(q->dtype) || kt->dtype != q->dtype || v->dtype != q->dtype)
    return kernelError("unsupported: " + call.opType + " with element types " +
                       dtypeName(q->dtype) + ", " + dtypeName(kt->dtype) + ", " +
                       dtypeName(v->dtype));
  if (const TensorRef *m = call.input(kMask); m && m->dtype != DType::Bool)
    return kernelError(call.opType + ": the mask must be bool, not " + dtypeName(m->dtype));
  if (const TensorRef *b = call.input(kBias); b && b->dtype != q->dtype)
    return kernelError(call.opType + ": the bias has type " + dtypeName(b->dtype) +
                       ", the queries " + dtypeName(q->dtype));
  return Error::success();
}

template <typename T>
llvm::Expected<Problem<T>> problemOf(const KernelCall &call) {
  Problem<T> p;
  llvm::SmallVector<int64_t, 6> lead;
  if (Error e = checkOperands(call, p.dims, lead))
    return std::move(e);
  auto mask = broadcastOf(call, call.input(kMask), lead, p.dims, "mask");
  if (!mask)
    return mask.takeError();
  auto bias = broadcastOf(call, call.input(kBias), lead, p.dims, "bias");
  if (!bias)
    return bias.takeError();
  p.mask = *mask;
  p.bias = *bias;
  p.q = call.input(kQ)->template as<const T>();
  p.kt = call.input(kKt)->template as<const T>();
  p.v = call.input(kV)->template as<const T>();
  p.maskData = p.mask.present ? call.input(kMask)->template as<const bool>() : nullptr;
  p.biasData = p.bias.present ? call.input(kBias)->template as<const T>() : nullptr;
  p.scale = static_cast<typename Problem<T>::C>(call.attrs.getFloat("scale", 1));
  p.fill = static_cast<typename Problem<T>::C>(call.attrs.getFloat("fill", 0));
  p.causal = call.attrs.getInt("causal", 0) != 0;
  double ratio = call.attrs.getFloat("ratio", 0);
  if (!(ratio >= 0 && ratio < 1))
    return kernelError(call.opType + ": ratio " + Twine(std::to_string(ratio)) +
                       " is outside [0, 1)");
  if (ratio > 0) {
    int64_t id = call.attrs.getInt("seed_id", -1);
    if (id < 0 || id > UINT32_MAX)
      return kernelError(call.opType + ": dropout needs a seed_id (a 32-bit unsigned integer)");
    p.ratio = static_cast<float>(ratio);
    p.seedId = static_cast<uint32_t>(id);
    p.seed = call.seed;
    p.step = call.sampleStep();
    // Numbered as a Dropout on the [..., Tq, Tk] probabilities numbers
    // them, rank r's from r times their count.
    if (call.comm)
      p.dropOffset = static_cast<uint64_t>(call.comm->rank()) *
                     static_cast<uint64_t>(p.dims.heads * p.dims.tq * p.dims.tk);
  }
  return p;
}

/// A [rows, cols] tile of a row-major matrix with leading dimension ld, in
/// the compute type: the matrix itself when it is stored so, else widened
/// into `buffer`.
template <typename T, typename C>
const C *tileOf(const T *m, int64_t ld, int64_t rows, int64_t cols, C *buffer,
                int64_t &tileLd) {
  if constexpr (std::is_same_v<T, C>) {
    tileLd = ld;
    return m;
  } else {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        buffer[r * cols + c] = load(m[r * ld + c]);
    tileLd = cols;
    return buffer;
  }
}

/// The widened tiles of one (query block, key block) pair.
template <typename T, typename C> struct Tiles {
  static constexpr int64_t B = kBlock<C>;
  static constexpr bool widen = !std::is_same_v<T, C>;
  C qBuf[widen ? B * kMaxHeadDim : 1];
  C ktBuf[widen ? B * kMaxHeadDim : 1];
  C vBuf[widen ? B * kMaxHeadDim : 1];
  const C *q = nullptr, *kt = nullptr, *v = nullptr;
  int64_t qLd = 0, ktLd = 0, vLd = 0;
};

template <typename C>
void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, C alpha,
          const C *a, int64_t lda, const C *b, int64_t ldb, C beta, C *c,
          int64_t ldc) {
  if (m == 0 || n == 0)
    return;
  if (k == 0) {
    for (int64_t r = 0; r < m; ++r)
      for (int64_t s = 0; s < n; ++s)
        c[r * ldc + s] = beta == C(0) ? C(0) : beta * c[r * ldc + s];
    return;
  }
  gemmOnThisThread(GemmArgs<C>::make(transA, transB, m, n, k, alpha, a, lda, b, ldb,
                                     beta, c, ldc));
}

/// The row operations of a tile: RowMath's vector loops in f32, plain
/// loops in f64.
template <typename C> struct TileRows {
  static C max(const C *x, int64_t n) {
    C top = -std::numeric_limits<C>::infinity();
    for (int64_t c = 0; c < n; ++c)
      top = std::max(top, x[c]);
    return top;
  }
  /// x = exp(x - shift) (0 where x is -inf); returns the sum.
  static C exponentiate(C *x, int64_t n, C shift) {
    C sum = 0;
    for (int64_t c = 0; c < n; ++c) {
      x[c] = x[c] == -std::numeric_limits<C>::infinity() ? C(0) : std::exp(x[c] - shift);
      sum += x[c];
    }
    return sum;
  }
  static C dot(const C *a, const C *b, int64_t n) {
    C sum = 0;
    for (int64_t c = 0; c < n; ++c)
      sum += a[c] * b[c];
    return sum;
  }
  /// ds = p (dp - dot).
  static void softmaxGrad(const C *p, const C *dp, C *ds, int64_t n, C dot) {
    for (int64_t c = 0; c < n; ++c)
      ds[c] = p[c] * (dp[c] - dot);
  }
};
template <> struct TileRows<float> {
  static float max(const float *x, int64_t n) { return rowMath().max(x, n); }
  static float exponentiate(float *x, int64_t n, float shift) {
    const RowMath &rm = rowMath();
    float sum = rm.sumExp(x, n, shift);
    rm.expScale(x, x, n, shift, 1.0f);
    return sum;
  }
  static float dot(const float *a, const float *b, int64_t n) { return rowMath().dot(a, b, n); }
  static void softmaxGrad(const float *p, const float *dp, float *ds, int64_t n, float dot) {
    rowMath().softmaxGrad(p, dp, ds, n, dot);
  }
};

/// The scores of rows [i0, i0 + rows) and columns [j0, j0 + cols) of head
/// h, into s (leading dimension kBlock): scaled products, masked, biased;
/// -inf where causal leaves a column out.
template <typename T, typename C>
void scoreTile(const Problem<T> &p, int64_t h, int64_t i0, int64_t rows, int64_t j0,
               int64_t cols, const Tiles<T, C> &t, C *s) {
  constexpr int64_t B = kBlock<C>;
  gemm<C>(false, false, rows, cols, p.dims.d, p.scale, t.q, t.qLd, t.kt, t.ktLd, C(0), s, B);
  int64_t shift = p.dims.tk - p.dims.tq;
  if (p.maskData || p.biasData) {
    int64_t maskBase = p.mask.present ? p.mask.headBase(h) : 0;
    int64_t biasBase = p.bias.present ? p.bias.headBase(h) : 0;
    for (int64_t r = 0; r < rows; ++r) {
      C *row = s + r * B;
      if (p.maskData) {
        const bool *m = p.maskData + p.mask.offset(maskBase, i0 + r, j0);
        for (int64_t c = 0; c < cols; ++c)
          if (m[c * p.mask.colStride])
            row[c] = p.fill;
      }
      if (p.biasData) {
        const T *b = p.biasData + p.bias.offset(biasBase, i0 + r, j0);
        for (int64_t c = 0; c < cols; ++c)
          row[c] += load(b[c * p.bias.colStride]);
      }
    }
  }
  if (p.causal)
    for (int64_t r = 0; r < rows; ++r) {
      // Columns j > i + shift are left out.
      int64_t first = std::max<int64_t>(0, i0 + r + shift + 1 - j0);
      std::fill(s + r * B + std::min(first, cols), s + r * B + cols,
                -std::numeric_limits<C>::infinity());
    }
}

/// Calls fn(r, c, keepScale) over the tile with keepScale 0 (dropped) or
/// 1 / (1 - ratio) (kept), from the Philox stream of a Dropout on P.
template <typename T, typename C, typename Fn>
void forEachKeep(const Problem<T> &p, int64_t h, int64_t i0, int64_t rows, int64_t j0,
                 int64_t cols, Fn &&fn) {
  C kept = p.dropScale();
  for (int64_t r = 0; r < rows; ++r) {
    uint64_t rowIndex = p.dropOffset +
                        static_cast<uint64_t>((h * p.dims.tq + i0 + r) * p.dims.tk + j0);
    for (int64_t c = 0; c < cols; ++c) {
      uint64_t index = rowIndex + static_cast<uint64_t>(c);
      Philox4x32Counter words = dropoutBlock(p.seed, p.step, p.seedId, index / 4);
      fn(r, c, dropoutKeeps(words.v[index % 4], p.ratio) ? kept : C(0));
    }
  }
}

template <typename T, typename C>
void loadQueryTile(const Problem<T> &p, int64_t h, int64_t i0, int64_t rows, Tiles<T, C> &t) {
  t.q = tileOf<T, C>(p.q + (h * p.dims.tq + i0) * p.dims.d, p.dims.d, rows, p.dims.d,
                     t.qBuf, t.qLd);
}
template <typename T, typename C>
void loadKeyTiles(const Problem<T> &p, int64_t h, int64_t j0, int64_t cols, Tiles<T, C> &t) {
  t.kt = tileOf<T, C>(p.kt + h * p.dims.d * p.dims.tk + j0, p.dims.tk, p.dims.d, cols,
                      t.ktBuf, t.ktLd);
  t.v = tileOf<T, C>(p.v + (h * p.dims.tk + j0) * p.dims.dv, p.dims.dv, cols, p.dims.dv,
                     t.vBuf, t.vLd);
}

/// Runs fn(unit) for units [0, n), over the team when the work pays.
template <typename Fn> void forUnits(int64_t n, double flops, Fn &&fn) {
  bool big = n > 1 && flops > 4e6;
  if (useThreads(big)) {
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t u = 0; u < n; ++u)
      fn(u);
    return;
  }
  for (int64_t u = 0; u < n; ++u)
    fn(u);
}

double attentionFlops(const Dims &d) {
  return 2.0 * d.heads * d.tq * d.tk * (d.d + d.dv);
}

template <typename T>
Error attentionForward(const KernelCall &call, const Problem<T> &p) {
  using C = ComputeT<T>;
  constexpr int64_t B = kBlock<C>;
  const Dims &d = p.dims;
  TensorRef *y = call.output(0), *lse = call.output(1);
  if (!y || y->dtype != call.input(kQ)->dtype || y->numElements() != d.heads * d.tq * d.dv)
    return kernelError(call.opType + ": Y must be [..., Tq, Dv] of the queries' type");
  DType lseType = std::is_same_v<C, double> ? DType::F64 : DType::F32;
  if (!lse || lse->dtype != lseType || lse->numElements() != d.heads * d.tq)
    return kernelError(call.opType + ": LSE must be [..., Tq] of " + dtypeName(lseType));
  T *out = y->as<T>();
  C *lseOut = lse->as<C>();
  int64_t blocks = (d.tq + B - 1) / B;
  forUnits(d.heads * blocks, attentionFlops(d), [&](int64_t unit) {
    int64_t h = unit / blocks, i0 = unit % blocks * B, rows = std::min(B, d.tq - i0);
    Tiles<T, C> t;
    C s[B * B], acc[B * kMaxHeadDim], m[B], l[B];
    std::fill_n(acc, rows * d.dv, C(0));
    std::fill_n(m, rows, -std::numeric_limits<C>::infinity());
    std::fill_n(l, rows, C(0));
    loadQueryTile(p, h, i0, rows, t);
    int64_t end = p.columnsEnd(i0 + rows);
    for (int64_t j0 = 0; j0 < end; j0 += B) {
      int64_t cols = std::min(B, end - j0);
      loadKeyTiles(p, h, j0, cols, t);
      scoreTile(p, h, i0, rows, j0, cols, t, s);
      for (int64_t r = 0; r < rows; ++r) {
        C *row = s + r * B;
        C top = std::max(m[r], TileRows<C>::max(row, cols));
        if (top == -std::numeric_limits<C>::infinity()) {
          // Every column so far is left out: they weigh nothing.
          std::fill_n(row, cols, C(0));
          continue;
        }
        C rescale = std::exp(m[r] - top);
        C sum = TileRows<C>::exponentiate(row, cols, top);
        m[r] = top;
        l[r] = l[r] * rescale + sum;
        if (rescale != C(1))
          for (int64_t e = 0; e < d.dv; ++e)
            acc[r * d.dv + e] *= rescale;
      }
      if (p.ratio > 0)
        forEachKeep<T, C>(p, h, i0, rows, j0, cols,
                          [&](int64_t r, int64_t c, C keep) { s[r * B + c] *= keep; });
      gemm<C>(false, false, rows, d.dv, cols, C(1), s, B, t.v, t.vLd, C(1), acc, d.dv);
    }
    for (int64_t r = 0; r < rows; ++r) {
      // A row with every score -inf is 0 / 0, NaN, as softmax gives it.
      C inv = C(1) / l[r];
      T *dst = out + (h * d.tq + i0 + r) * d.dv;
      for (int64_t e = 0; e < d.dv; ++e)
        dst[e] = store<T>(acc[r * d.dv + e] * inv);
      lseOut[h * d.tq + i0 + r] = m[r] + std::log(l[r]);
    }
  });
  return Error::success();
}

/// The backward's operands beside the forward's.
template <typename T> struct GradOperands {
  using C = ComputeT<T>;
  const T *y = nullptr, *dy = nullptr;
  const C *lse = nullptr;
  T *dq = nullptr, *dkt = nullptr, *dv = nullptr, *dbias = nullptr;
};

/// One (query block, key block) pair of the backward: P rebuilt from LSE,
/// dS = P (dP - rowsum(dY Y)); dsScores is dS where the scores reach the
/// product (zero where the mask replaced them). pdrop is P after dropout.
template <typename T, typename C> struct GradTile {
  static constexpr int64_t B = kBlock<C>;
  static constexpr bool widen = !std::is_same_v<T, C>;
  C p[B * B], pdrop[B * B], ds[B * B], dsScores[B * B], rowDot[B];
  /// P after dropout (pdrop, or p itself without dropout), and the
  /// gradient reaching the products (dsScores where a mask replaced
  /// scores, ds itself otherwise).
  const C *dropped = nullptr, *scores = nullptr;
  C dyBuf[widen ? B * kMaxHeadDim : 1];
  const C *dy = nullptr;
  int64_t dyLd = 0;
};

template <typename T, typename C>
void gradTile(const Problem<T> &p, const GradOperands<T> &g, int64_t h, int64_t i0,
              int64_t rows, int64_t j0, int64_t cols, Tiles<T, C> &t, GradTile<T, C> &k) {
  constexpr int64_t B = kBlock<C>;
  const Dims &d = p.dims;
  k.dy = tileOf<T, C>(g.dy + (h * d.tq + i0) * d.dv, d.dv, rows, d.dv, k.dyBuf, k.dyLd);
  for (int64_t r = 0; r < rows; ++r) {
    const T *yRow = g.y + (h * d.tq + i0 + r) * d.dv;
    if constexpr (std::is_same_v<T, C>) {
      k.rowDot[r] = TileRows<C>::dot(k.dy + r * k.dyLd, yRow, d.dv);
    } else {
      C dot = 0;
      for (int64_t e = 0; e < d.dv; ++e)
        dot += k.dy[r * k.dyLd + e] * load(yRow[e]);
      k.rowDot[r] = dot;
    }
  }
  scoreTile(p, h, i0, rows, j0, cols, t, k.p);
  for (int64_t r = 0; r < rows; ++r) {
    C lse = g.lse[h * d.tq + i0 + r];
    C *row = k.p + r * B;
    // A row with no score in (lse -inf) has no probability anywhere.
    if (lse == -std::numeric_limits<C>::infinity())
      std::fill_n(row, cols, C(0));
    else
      TileRows<C>::exponentiate(row, cols, lse);
  }
  // dP of the dropped probabilities, dY V^T, into ds.
  gemm<C>(false, true, rows, cols, d.dv, C(1), k.dy, k.dyLd, t.v, t.vLd, C(0), k.ds, B);
  if (p.ratio > 0) {
    for (int64_t r = 0; r < rows; ++r)
      std::copy_n(k.p + r * B, cols, k.pdrop + r * B);
    forEachKeep<T, C>(p, h, i0, rows, j0, cols, [&](int64_t r, int64_t c, C keep) {
      k.pdrop[r * B + c] *= keep;
      k.ds[r * B + c] *= keep;
    });
    k.dropped = k.pdrop;
  } else {
    k.dropped = k.p;
  }
  for (int64_t r = 0; r < rows; ++r)
    TileRows<C>::softmaxGrad(k.p + r * B, k.ds + r * B, k.ds + r * B, cols, k.rowDot[r]);
  k.scores = k.ds;
  if (p.maskData) {
    int64_t maskBase = p.mask.headBase(h);
    for (int64_t r = 0; r < rows; ++r) {
      const bool *m = p.maskData + p.mask.offset(maskBase, i0 + r, j0);
      for (int64_t c = 0; c < cols; ++c)
        k.dsScores[r * B + c] = m[c * p.mask.colStride] ? C(0) : k.ds[r * B + c];
    }
    k.scores = k.dsScores;
  }
}

/// A key block's accumulated dKt columns ([D, kBlock] tile) and dV rows.
template <typename T, typename C>
void storeKeyGradients(const GradOperands<T> &g, const Dims &d, int64_t h, int64_t j0,
                       int64_t cols, const C *dktAcc, const C *dvAcc) {
  constexpr int64_t B = kBlock<C>;
  for (int64_t e = 0; e < d.d; ++e)
    for (int64_t c = 0; c < cols; ++c)
      g.dkt[(h * d.d + e) * d.tk + j0 + c] = store<T>(dktAcc[e * B + c]);
  for (int64_t c = 0; c < cols; ++c)
    for (int64_t e = 0; e < d.dv; ++e)
      g.dv[(h * d.tk + j0 + c) * d.dv + e] = store<T>(dvAcc[c * d.dv + e]);
}

template <typename T>
Error attentionBackward(const KernelCall &call, const Problem<T> &p) {
  using C = ComputeT<T>;
  constexpr int64_t B = kBlock<C>;
  const Dims &d = p.dims;
  const TensorRef *y = call.input(kY), *lse = call.input(kLse), *dy = call.input(kDy);
  DType lseType = std::is_same_v<C, double> ? DType::F64 : DType::F32;
  DType type = call.input(kQ)->dtype;
  if (!y || !dy || y->dtype != type || dy->dtype != type ||
      y->numElements() != d.heads * d.tq * d.dv || dy->numElements() != y->numElements())
    return kernelError(call.opType + ": Y and dY must be [..., Tq, Dv] of the queries' type");
  if (!lse || lse->dtype != lseType || lse->numElements() != d.heads * d.tq)
    return kernelError(call.opType + ": LSE must be [..., Tq] of " + dtypeName(lseType));
  const TensorRef *ins[3] = {call.input(kQ), call.input(kKt), call.input(kV)};
  for (unsigned o = kDq; o <= kDv; ++o) {
    const TensorRef *out = call.output(o);
    if (!out || out->dtype != type || out->shape != ins[o]->shape)
      return kernelError(call.opType + ": gradient " + Twine(o) + " must have its operand's type and shape");
  }
  TensorRef *dbias = call.output(kDbias);
  if (dbias) {
    const TensorRef *bias = call.input(kBias);
    if (!bias || dbias->dtype != type || dbias->shape != bias->shape)
      return kernelError(call.opType + ": dBias must have the bias's type and shape");
    if (p.bias.rowStride == 0 || p.bias.colStride == 0)
      return kernelError(call.opType + ": a trained bias must cover whole [Tq, Tk] matrices, not " +
                         formatShape(bias->shape));
  }
  GradOperands<T> g;
  g.y = y->as<const T>();
  g.dy = dy->as<const T>();
  g.lse = lse->as<const C>();
  g.dq = call.output(kDq)->as<T>();
  g.dkt = call.output(kDkt)->as<T>();
  g.dv = call.output(kDv)->as<T>();
  g.dbias = dbias ? dbias->as<T>() : nullptr;
  double flops = attentionFlops(d);

  if constexpr (std::is_same_v<T, C>) {
    // One pass per head when there are heads enough for the team and dQ
    // can accumulate in place (its own type is the compute type): each
    // (key block, query block) pair is rebuilt once, and the pair's
    // contribution to dQ is added straight into the output.
    if (!g.dbias && d.heads >= omp_get_max_threads()) {
      forUnits(d.heads, flops, [&](int64_t h) {
        std::fill_n(g.dq + h * d.tq * d.d, d.tq * d.d, C(0));
        Tiles<T, C> t;
        GradTile<T, C> k;
        C dktAcc[kMaxHeadDim * B], dvAcc[B * kMaxHeadDim];
        for (int64_t j0 = 0; j0 < d.tk; j0 += B) {
          int64_t cols = std::min(B, d.tk - j0);
          std::fill_n(dktAcc, d.d * B, C(0));
          std::fill_n(dvAcc, cols * d.dv, C(0));
          loadKeyTiles(p, h, j0, cols, t);
          for (int64_t i0 = p.rowsBegin(j0) / B * B; i0 < d.tq; i0 += B) {
            int64_t rows = std::min(B, d.tq - i0);
            loadQueryTile(p, h, i0, rows, t);
            gradTile(p, g, h, i0, rows, j0, cols, t, k);
            gemm<C>(true, false, cols, d.dv, rows, C(1), k.dropped, B, k.dy, k.dyLd, C(1), dvAcc,
                    d.dv);
            gemm<C>(true, false, d.d, cols, rows, p.scale, t.q, t.qLd, k.scores, B, C(1),
                    dktAcc, B);
            gemm<C>(false, true, rows, d.d, cols, p.scale, k.scores, B, t.kt, t.ktLd, C(1),
                    g.dq + (h * d.tq + i0) * d.d, d.d);
          }
          storeKeyGradients(g, d, h, j0, cols, dktAcc, dvAcc);
        }
      });
      return Error::success();
    }
  }

  // Otherwise two passes, each unit writing only what it owns.
  // Pass A: a key block's dKt columns and dV rows, over every query block.
  int64_t keyBlocks = (d.tk + B - 1) / B;
  forUnits(d.heads * keyBlocks, flops, [&](int64_t unit) {
    int64_t h = unit / keyBlocks, j0 = unit % keyBlocks * B, cols = std::min(B, d.tk - j0);
    Tiles<T, C> t;
    GradTile<T, C> k;
    C dktAcc[kMaxHeadDim * B], dvAcc[B * kMaxHeadDim];
    std::fill_n(dktAcc, d.d * B, C(0));
    std::fill_n(dvAcc, cols * d.dv, C(0));
    loadKeyTiles(p, h, j0, cols, t);
    for (int64_t i0 = p.rowsBegin(j0) / B * B; i0 < d.tq; i0 += B) {
      int64_t rows = std::min(B, d.tq - i0);
      loadQueryTile(p, h, i0, rows, t);
      gradTile(p, g, h, i0, rows, j0, cols, t, k);
      gemm<C>(true, false, cols, d.dv, rows, C(1), k.dropped, B, k.dy, k.dyLd, C(1), dvAcc, d.dv);
      gemm<C>(true, false, d.d, cols, rows, p.scale, t.q, t.qLd, k.scores, B, C(1), dktAcc, B);
    }
    storeKeyGradients(g, d, h, j0, cols, dktAcc, dvAcc);
  });

  // Pass B: a query block's dQ rows over every key block. Heads that share
  // the bias's [Tq, Tk] matrix go to one unit, in order, so that each
  // element of dBias has one writer.
  int64_t queryBlocks = (d.tq + B - 1) / B;
  int64_t groups = d.heads;
  if (g.dbias) {
    groups = 1;
    for (size_t a = 0; a < p.bias.headDims.size(); ++a)
      if (p.bias.headStrides[a] != 0)
        groups *= p.bias.headDims[a];
    std::fill_n(g.dbias, dbias->numElements(), store<T>(C(0)));
  }
  forUnits(groups * queryBlocks, flops, [&](int64_t unit) {
    int64_t group = unit / queryBlocks, i0 = unit % queryBlocks * B,
            rows = std::min(B, d.tq - i0);
    Tiles<T, C> t;
    GradTile<T, C> k;
    C dqAcc[B * kMaxHeadDim];
    for (int64_t h = 0; h < d.heads; ++h) {
      int64_t biasBase = g.dbias ? p.bias.headBase(h) : 0;
      // The heads of this unit: all of them for one bias matrix, or one.
      if (g.dbias ? biasBase / (p.bias.rowStride * d.tq) != group : h != group)
        continue;
      std::fill_n(dqAcc, rows * d.d, C(0));
      loadQueryTile(p, h, i0, rows, t);
      int64_t end = p.columnsEnd(i0 + rows);
      for (int64_t j0 = 0; j0 < end; j0 += B) {
        int64_t cols = std::min(B, end - j0);
        loadKeyTiles(p, h, j0, cols, t);
        gradTile(p, g, h, i0, rows, j0, cols, t, k);
        gemm<C>(false, true, rows, d.d, cols, p.scale, k.scores, B, t.kt, t.ktLd, C(1), dqAcc, d.d);
        if (g.dbias)
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t c = 0; c < cols; ++c) {
              T &slot = g.dbias[p.bias.offset(biasBase, i0 + r, j0 + c)];
              slot = store<T>(load(slot) + k.ds[r * B + c]);
            }
      }
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t e = 0; e < d.d; ++e)
          g.dq[(h * d.tq + i0 + r) * d.d + e] = store<T>(dqAcc[r * d.d + e]);
    }
  });
  return Error::success();
}

} // namespace

Error runAttention(const KernelCall &call) {
  const TensorRef *q = call.input(kQ);
  if (!q)
    return kernelError(call.opType + ": Q is required");
  return visitDType(q->dtype, [&](auto tag) -> Error {
    using T = decltype(tag);
    if constexpr (!isFloatStorage<T>()) {
      return kernelError("unsupported: " + call.opType + " with element type " +
                         dtypeName(q->dtype));
    } else {
      auto p = problemOf<T>(call);
      if (!p)
        return p.takeError();
      return attentionForward<T>(call, *p);
    }
  });
}

Error runAttentionGrad(const KernelCall &call) {
  const TensorRef *q = call.input(kQ);
  if (!q)
    return kernelError(call.opType + ": Q is required");
  return visitDType(q->dtype, [&](auto tag) -> Error {
    using T = decltype(tag);
    if constexpr (!isFloatStorage<T>()) {
      return kernelError("unsupported: " + call.opType + " with element type " +
                         dtypeName(q->dtype));
    } else {
      auto p = problemOf<T>(call);
      if (!p)
        return p.takeError();
      return attentionBackward<T>(call, *p);
    }
  });
}

} // namespace zinc::cpu
