//===- Normalization.cpp - Softmax, LogSoftmax and LayerNormalization -----===//
//
// All three normalise rows: the input is viewed as [outer, D, inner] with the
// statistic taken over D. Statistics are accumulated in double so that a long
// row (a vocabulary, a hidden size of 64K) keeps its digits; the 16-bit
// floats are computed in float and rounded once on store.
//
//===----------------------------------------------------------------------===//
#include "KernelUtil.h"
#include "Kernels.h"
#include "llvm/ADT/Twine.h"
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

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

/// Softmax over contiguous rows of length d; `scratch` holds d values.
template <bool isLog, typename T, typename C>
static void softmaxRow(const T *x, T *y, int64_t d, C *scratch) {
  C m = -std::numeric_limits<C>::infinity();
#pragma omp simd reduction(max : m)
  for (int64_t j = 0; j < d; ++j)
    m = std::max(m, static_cast<C>(load(x[j])));
  double sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < d; ++j) {
    scratch[j] = static_cast<C>(load(x[j])) - m;
    sum += std::exp(scratch[j]);
  }
  if constexpr (isLog) {
    C logSum = static_cast<C>(std::log(sum));
#pragma omp simd
    for (int64_t j = 0; j < d; ++j)
      y[j] = store<T>(scratch[j] - logSum);
  } else {
    C inv = static_cast<C>(1.0 / sum);
    for (int64_t j = 0; j < d; ++j)
      y[j] = store<T>(std::exp(scratch[j]) * inv);
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

  visitDType(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (isFloatStorage<T>()) {
      using C = ComputeT<T>;
      const T *px = x.as<const T>();
      T *py = y.as<T>();
      if (inner == 1) {
#pragma omp parallel if (parallel)
        {
          std::vector<C> scratch(d);
#pragma omp for schedule(static)
          for (int64_t o = 0; o < outer; ++o)
            softmaxRow<isLog>(px + o * d, py + o * d, d, scratch.data());
        }
        return;
      }
      int64_t blocks = (inner + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static) if (parallel)
      for (int64_t task = 0; task < outer * blocks; ++task) {
        int64_t o = task / blocks, i0 = (task % blocks) * kColumnBlock;
        int64_t off = o * d * inner + i0;
        softmaxColumns<isLog, T, C>(px + off, py + off, d, inner,
                                    std::min(kColumnBlock, inner - i0));
      }
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

/// Scale or B as d values in the compute type, broadcast over the
/// normalised dimensions `norm`. Leading 1s are ignored, since they only
/// broadcast against X's leading dimensions; a tensor that varies along
/// those dimensions is refused.
template <typename C>
static llvm::Expected<std::vector<C>>
expandAffine(const KernelCall &call, const TensorRef &t,
             llvm::ArrayRef<int64_t> norm, llvm::StringRef what) {
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
  std::vector<C> out(numElements(norm));
  llvm::SmallVector<int64_t, 6> strides = broadcastStrides(shape, norm);
  llvm::SmallVector<int64_t, 6> outStrides = contiguousStrides(norm);
  visitDType(t.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *p = t.as<const T>();
    forEachStrided<2>(norm, {strides, outStrides},
                      [&](const std::array<int64_t, 2> &off) {
                        out[off[1]] = static_cast<C>(load(p[off[0]]));
                      });
  });
  return out;
}

/// Writes `n` statistics (double) into an optional float output.
static llvm::Error storeStats(const KernelCall &call, TensorRef *t,
                              const std::vector<double> &v,
                              llvm::StringRef what) {
  if (!t)
    return llvm::Error::success();
  if (t->numElements() != static_cast<int64_t>(v.size()) ||
      !isFloatDType(t->dtype))
    return kernelError("LayerNormalization: " + what + " output has shape " +
                       formatShape(t->shape) + " and type " +
                       dtypeName(t->dtype) + ", expected " +
                       llvm::Twine(v.size()) + " float elements");
  visitDType(t->dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (isFloatStorage<T>()) {
      T *p = t->as<T>();
      for (size_t i = 0; i < v.size(); ++i)
        p[i] = store<T>(v[i]);
    }
  });
  return llvm::Error::success();
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

  std::vector<double> means(outer), invStd(outer);
  auto normalize = [&](auto tag) -> llvm::Error {
    using T = decltype(tag);
    if constexpr (isFloatStorage<T>()) {
      using C = ComputeT<T>;
      auto g = expandAffine<C>(call, *scale, norm, "Scale");
      if (!g)
        return g.takeError();
      std::vector<C> b(d, C(0));
      if (bias) {
        auto bv = expandAffine<C>(call, *bias, norm, "B");
        if (!bv)
          return bv.takeError();
        b = std::move(*bv);
      }
      const C *pg = g->data(), *pb = b.data();
      const T *px = x.as<const T>();
      T *py = y.as<T>();
#pragma omp parallel for schedule(static) if (outer * d >= kParallelMin)
      for (int64_t o = 0; o < outer; ++o) {
        const T *row = px + o * d;
        double sum = 0;
#pragma omp simd reduction(+ : sum)
        for (int64_t j = 0; j < d; ++j)
          sum += static_cast<double>(load(row[j]));
        double mean = d ? sum / d : 0;
        double sq = 0;
#pragma omp simd reduction(+ : sq)
        for (int64_t j = 0; j < d; ++j) {
          double c = static_cast<double>(load(row[j])) - mean;
          sq += c * c;
        }
        double inv = 1.0 / std::sqrt((d ? sq / d : 0) + epsilon);
        means[o] = mean;
        invStd[o] = inv;
        C m = static_cast<C>(mean), s = static_cast<C>(inv);
        T *out = py + o * d;
#pragma omp simd
        for (int64_t j = 0; j < d; ++j)
          out[j] =
              store<T>((static_cast<C>(load(row[j])) - m) * s * pg[j] + pb[j]);
      }
    }
    return llvm::Error::success();
  };
  if (auto err = visitDType(x.dtype, normalize))
    return err;
  if (auto err = storeStats(call, call.output(1), means, "Mean"))
    return err;
  return storeStats(call, call.output(2), invStd, "InvStdDev");
}

} // namespace zinc::cpu
