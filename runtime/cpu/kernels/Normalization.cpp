//===- Normalization.cpp - Softmax, LogSoftmax and LayerNormalization -----===//
//
// All three normalise rows: the input is viewed as [outer, D, inner] with the
// statistic taken over D. Statistics are accumulated in double so that a long
// row (a vocabulary, a hidden size of 64K) keeps its digits; the 16-bit
// floats are computed in float and rounded once on store. Softmax needs no
// scratch (exp is recomputed rather than buffered); LayerNormalization
// takes its expanded Scale and B from the call's workspace.
//
//===----------------------------------------------------------------------===//
#include "KernelUtil.h"
#include "RowStats.h"
#include "Kernels.h"
#include "zinc/runtime/cpu/RowMath.h"
#include "llvm/ADT/Twine.h"
#include <algorithm>
#include <cmath>
#include <limits>

namespace zinc::cpu {

/// Below this many elements thread start-up costs more than it saves.
static constexpr int64_t kParallelMin = int64_t(1) << 15;
/// Columns handled together when the normalised axis is not innermost.
static constexpr int64_t kColumnBlock = 64;

/// Checks that X and Y exist, are floats of one type and the same shape.
static llvm::Error checkFloatSameShape(const KernelCall &call) {
  const TensorRef *x = call.input(0);
  const TensorRef *y = call.output(0);
  if (!x || !y)
    return kernelError(call.opType + ": missing input 0 or output 0");
  if (!isFloatDType(x->dtype) || x->dtype != y->dtype)
    return kernelError("unsupported: " + call.opType + " from " +
                       dtypeName(x->dtype) + " to " + dtypeName(y->dtype));
  if (x->shape != y->shape)
    return kernelError(call.opType + ": output shape " + formatShape(y->shape) +
                       " differs from input shape " + formatShape(x->shape));
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Softmax and LogSoftmax
//===----------------------------------------------------------------------===//

/// Softmax over one contiguous row of length d. x - max is recomputed in
/// each pass rather than kept, which gives the same values without scratch.
template <bool isLog, typename T, typename C>
static void softmaxRow(const T *x, T *y, int64_t d) {
  C m = -std::numeric_limits<C>::infinity();
#pragma omp simd reduction(max : m)
  for (int64_t j = 0; j < d; ++j)
    m = std::max(m, static_cast<C>(load(x[j])));
  double sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < d; ++j) {
    C v = static_cast<C>(load(x[j])) - m;
    sum += std::exp(v);
  }
  if constexpr (isLog) {
    C logSum = static_cast<C>(std::log(sum));
#pragma omp simd
    for (int64_t j = 0; j < d; ++j)
      y[j] = store<T>((static_cast<C>(load(x[j])) - m) - logSum);
  } else {
    C inv = static_cast<C>(1.0 / sum);
    for (int64_t j = 0; j < d; ++j)
      y[j] = store<T>(std::exp(static_cast<C>(load(x[j])) - m) * inv);
  }
}

/// Softmax along the middle axis of [outer, d, inner], a block of `len`
/// columns at a time; exp is computed twice rather than buffering d rows.
template <bool isLog, typename T, typename C>
static void softmaxColumns(const T *x, T *y, int64_t d, int64_t inner,
                           int64_t len) {
  C m[kColumnBlock];
  double sum[kColumnBlock];
  for (int64_t i = 0; i < len; ++i) {
    m[i] = -std::numeric_limits<C>::infinity();
    sum[i] = 0;
  }
  for (int64_t j = 0; j < d; ++j)
    for (int64_t i = 0; i < len; ++i)
      m[i] = std::max(m[i], static_cast<C>(load(x[j * inner + i])));
  for (int64_t j = 0; j < d; ++j)
    for (int64_t i = 0; i < len; ++i)
      sum[i] += std::exp(static_cast<C>(load(x[j * inner + i])) - m[i]);
  for (int64_t j = 0; j < d; ++j)
    for (int64_t i = 0; i < len; ++i) {
      C v = static_cast<C>(load(x[j * inner + i])) - m[i];
      if constexpr (isLog)
        y[j * inner + i] = store<T>(v - static_cast<C>(std::log(sum[i])));
      else
        y[j * inner + i] = store<T>(static_cast<C>(std::exp(v) / sum[i]));
    }
}

/// Before opset 13 the input is flattened to 2-D at `axis` (default 1) and
/// normalised over the whole second dimension; from 13 only along `axis`
/// (default -1).
template <bool isLog>
static llvm::Error runSoftmaxFamily(const KernelCall &call) {
  if (auto err = checkFloatSameShape(call))
    return err;
  const TensorRef &x = *call.input(0);
  TensorRef &y = *call.output(0);
  bool flatten = call.opsetVersion < 13;
  auto geometry =
      softmaxGeometry(x.shape, call.attrs.getInt("axis", flatten ? 1 : -1), flatten);
  if (!geometry)
    return geometry.takeError();
  int64_t outer = geometry->outer, d = geometry->d, inner = geometry->inner;
  if (outer * d * inner == 0)
    return llvm::Error::success();
  bool parallel = outer * d * inner >= kParallelMin;

  if (inner == 1 && x.dtype == DType::F32 && d >= kRowMathMinRow) {
    // Rows of f32, the last axis: RowMath's vector loops. A row of -inf
    // gives NaN (exp of -inf minus -inf), as PyTorch's softmax does.
    const RowMath &rm = rowMath();
    const float *px = x.as<const float>();
    float *py = y.as<float>();
    parallelFor(outer, parallel, [&](int64_t o) {
      const float *row = px + o * d;
      float *out = py + o * d;
      float m = rm.max(row, d);
      float sum = rm.sumExp(row, d, m);
      if constexpr (isLog) {
        float logSum = std::log(sum);
        for (int64_t j = 0; j < d; ++j)
          out[j] = (row[j] - m) - logSum;
      } else {
        rm.expScale(row, out, d, m, 1.0f / sum);
      }
    });
    return llvm::Error::success();
  }

  visitDType(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (isFloatStorage<T>()) {
      using C = ComputeT<T>;
      const T *px = x.as<const T>();
      T *py = y.as<T>();
      if (inner == 1) {
        parallelFor(outer, parallel, [&](int64_t o) {
          softmaxRow<isLog, T, C>(px + o * d, py + o * d, d);
        });
        return;
      }
      int64_t blocks = (inner + kColumnBlock - 1) / kColumnBlock;
      parallelFor(outer * blocks, parallel, [&](int64_t task) {
        int64_t o = task / blocks, i0 = (task % blocks) * kColumnBlock;
        int64_t off = o * d * inner + i0;
        softmaxColumns<isLog, T, C>(px + off, py + off, d, inner,
                                    std::min(kColumnBlock, inner - i0));
      });
    }
  });
  return llvm::Error::success();
}

llvm::Error runSoftmax(const KernelCall &call) {
  return runSoftmaxFamily<false>(call);
}
llvm::Error runLogSoftmax(const KernelCall &call) {
  return runSoftmaxFamily<true>(call);
}

//===----------------------------------------------------------------------===//
// LayerNormalization
//===----------------------------------------------------------------------===//

/// Checks that Scale or B broadcasts to the normalised dimensions `norm`
/// the way LayerNormalization allows: leading 1s are ignored, since they
/// only broadcast against X's leading dimensions; a tensor that varies along
/// those dimensions is refused. Returns its strides over `norm`.
static llvm::Expected<llvm::SmallVector<int64_t, 6>>
affineStrides(const TensorRef &t, llvm::ArrayRef<int64_t> norm,
              llvm::StringRef what) {
  llvm::ArrayRef<int64_t> shape = t.shape;
  while (!shape.empty() && shape.front() == 1 && shape.size() > norm.size())
    shape = shape.drop_front();
  auto b = broadcastShapes(shape, norm);
  if (shape.size() > norm.size() || !b || llvm::ArrayRef<int64_t>(*b) != norm) {
    if (!b)
      llvm::consumeError(b.takeError());
    return kernelError("unsupported: LayerNormalization with " + what +
                       " of shape " + formatShape(t.shape) +
                       " for normalised shape " + formatShape(norm));
  }
  return broadcastStrides(shape, norm);
}

/// Scale or B (or zeros, for a null `t`) as the d values `out` over the
/// normalised shape, in the compute type.
template <typename C>
static void expandAffine(const TensorRef *t, llvm::ArrayRef<int64_t> strides,
                         llvm::ArrayRef<int64_t> norm, C *out) {
  if (!t) {
    std::fill(out, out + numElements(norm), C(0));
    return;
  }
  llvm::SmallVector<int64_t, 6> outStrides = contiguousStrides(norm);
  visitDType(t->dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *p = t->as<const T>();
    forEachStrided<2>(norm, {strides, outStrides},
                      [&](const std::array<int64_t, 2> &off) {
                        out[off[1]] = static_cast<C>(load(p[off[0]]));
                      });
  });
}

/// Checks an optional statistics output (Mean, InvStdDev): `n` floats.
static llvm::Error checkStats(TensorRef *t, int64_t n, llvm::StringRef what) {
  if (!t || (t->numElements() == n && isFloatDType(t->dtype)))
    return llvm::Error::success();
  return kernelError("LayerNormalization: " + what + " output has shape " +
                     formatShape(t->shape) + " and type " +
                     dtypeName(t->dtype) + ", expected " + llvm::Twine(n) +
                     " float elements");
}

/// Stores statistic `v` (double) at index `i` of an optional float output.
static void storeStat(TensorRef *t, int64_t i, double v) {
  if (!t)
    return;
  visitDType(t->dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (isFloatStorage<T>())
      t->as<T>()[i] = store<T>(v);
  });
}

/// Mean and variance in double with two passes (the one-pass E[x^2] - E[x]^2
/// of the spec's function body cancels badly when the mean is large); the
/// statistics may be stored in any float type, so stash_type only names
/// the Mean and InvStdDev output type.
llvm::Error runLayerNormalization(const KernelCall &call) {
  if (auto err = checkFloatSameShape(call))
    return err;
  const TensorRef &x = *call.input(0);
  TensorRef &y = *call.output(0);
  const TensorRef *scale = call.input(1);
  const TensorRef *bias = call.input(2);
  if (!scale)
    return kernelError("LayerNormalization: missing input 1 (Scale)");
  auto axisOr = normalizeAxis(call.attrs.getInt("axis", -1), x.rank());
  if (!axisOr)
    return axisOr.takeError();
  llvm::ArrayRef<int64_t> shape = x.shape;
  int64_t axis = std::min<int64_t>(*axisOr, shape.size());
  llvm::ArrayRef<int64_t> norm = shape.drop_front(axis);
  int64_t outer = numElements(shape.take_front(axis));
  int64_t d = numElements(norm);
  double epsilon = call.attrs.getFloat("epsilon", 1e-5);
  auto scaleStrides = affineStrides(*scale, norm, "Scale");
  if (!scaleStrides)
    return scaleStrides.takeError();
  llvm::SmallVector<int64_t, 6> biasStrides;
  if (bias) {
    auto s = affineStrides(*bias, norm, "B");
    if (!s)
      return s.takeError();
    biasStrides = std::move(*s);
  }
  TensorRef *meanOut = call.output(1), *invStdOut = call.output(2);
  if (auto err = checkStats(meanOut, outer, "Mean"))
    return err;
  if (auto err = checkStats(invStdOut, outer, "InvStdDev"))
    return err;

  return visitDType(x.dtype, [&](auto tag) -> llvm::Error {
    using T = decltype(tag);
    if constexpr (isFloatStorage<T>()) {
      using C = ComputeT<T>;
      auto g = call.scratch<C>(d);
      if (!g)
        return g.takeError();
      auto b = call.scratch<C>(d);
      if (!b)
        return b.takeError();
      expandAffine<C>(scale, *scaleStrides, norm, *g);
      expandAffine<C>(bias, biasStrides, norm, *b);
      const C *pg = *g, *pb = *b;
      const T *px = x.as<const T>();
      T *py = y.as<T>();
      parallelFor(outer, outer * d >= kParallelMin, [&](int64_t o) {
        const T *row = px + o * d;
        RowStats stats = rowStats(row, d, epsilon);
        double mean = stats.mean, inv = stats.invStd;
        C m = static_cast<C>(mean), s = static_cast<C>(inv);
        T *out = py + o * d;
#pragma omp simd
        for (int64_t j = 0; j < d; ++j)
          out[j] =
              store<T>((static_cast<C>(load(row[j])) - m) * s * pg[j] + pb[j]);
        storeStat(meanOut, o, mean);
        storeStat(invStdOut, o, inv);
      });
    }
    return llvm::Error::success();
  });
}

} // namespace zinc::cpu

namespace zinc::cpu {

//===----------------------------------------------------------------------===//
// zinc.MaskedSoftmax
//===----------------------------------------------------------------------===//

/// softmax(where(mask, -inf, x)) over the last axis (the fuse-masked-softmax
/// pass's op): inputs (x, mask), mask bool, broadcast to x through leading
/// axes only, so row r of x reads mask row r % (mask rows). The row is
/// written masked into y first and normalised there in place, in f32 by
/// RowMath.
llvm::Error runMaskedSoftmax(const KernelCall &call) {
  const TensorRef *x = call.input(0), *mask = call.input(1);
  TensorRef *y = call.output(0);
  if (!x || !mask || !y)
    return kernelError("MaskedSoftmax: expects inputs (x, mask) and an output");
  if (mask->dtype != DType::Bool || !isFloatDType(x->dtype) ||
      y->dtype != x->dtype || y->shape != x->shape)
    return kernelError("MaskedSoftmax: x and y must be one float type and "
                       "shape, the mask bool; got " +
                       dtypeName(x->dtype) + formatShape(x->shape) + ", " +
                       dtypeName(mask->dtype) + formatShape(mask->shape) +
                       " -> " + dtypeName(y->dtype) + formatShape(y->shape));
  int64_t d = x->rank() ? x->shape.back() : 1;
  int64_t n = x->numElements(), maskN = mask->numElements();
  if (d == 0 || n == 0)
    return llvm::Error::success();
  if (mask->rank() == 0 || mask->shape.back() != d || maskN == 0 ||
      n % maskN != 0)
    return kernelError("unsupported: MaskedSoftmax with mask " +
                       formatShape(mask->shape) + " for scores " +
                       formatShape(x->shape) +
                       " (the mask must broadcast through leading axes)");
  int64_t rows = n / d, maskRows = maskN / d;
  const bool *pm = mask->as<const bool>();
  const float inf = std::numeric_limits<float>::infinity();
  return visitDType(x->dtype, [&](auto tag) -> llvm::Error {
    using T = decltype(tag);
    if constexpr (isFloatStorage<T>()) {
      const T *px = x->as<const T>();
      T *py = y->as<T>();
      if constexpr (std::is_same_v<T, float>) {
        const RowMath &rm = rowMath();
        parallelFor(rows, n >= kParallelMin, [&](int64_t r) {
          const float *row = px + r * d;
          const bool *m = pm + (r % maskRows) * d;
          float *out = py + r * d;
          // A causal row ends in masked entries, half of them on average:
          // they come out 0 without an exp (a row masked whole stays NaN,
          // as PyTorch has it, through the full loop).
          int64_t end = d;
          while (end > 1 && m[end - 1])
            --end;
          if (end == 1 && m[0])
            end = d;
          std::fill(out + end, out + d, 0.0f);
          // Branch-free, so that it vectorises.
#pragma omp simd
          for (int64_t j = 0; j < end; ++j)
            out[j] = m[j] ? -inf : row[j];
          float mx = rm.max(out, end);
          float sum = rm.sumExp(out, end, mx);
          rm.expScale(out, out, end, mx, 1.0f / sum);
        });
      } else {
        using C = ComputeT<T>;
        parallelFor(rows, n >= kParallelMin, [&](int64_t r) {
          const T *row = px + r * d;
          const bool *m = pm + (r % maskRows) * d;
          T *out = py + r * d;
          C mx = -std::numeric_limits<C>::infinity();
          for (int64_t j = 0; j < d; ++j)
            if (!m[j])
              mx = std::max(mx, static_cast<C>(load(row[j])));
          double sum = 0;
          for (int64_t j = 0; j < d; ++j)
            if (!m[j])
              sum += std::exp(static_cast<C>(load(row[j])) - mx);
          C inv = static_cast<C>(1.0 / sum);
          for (int64_t j = 0; j < d; ++j)
            out[j] = store<T>(
                m[j] ? C(0) : std::exp(static_cast<C>(load(row[j])) - mx) * inv);
        });
      }
    }
    return llvm::Error::success();
  });
}

} // namespace zinc::cpu
