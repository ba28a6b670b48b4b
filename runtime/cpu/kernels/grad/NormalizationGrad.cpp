//===- NormalizationGrad.cpp - Gradients of Softmax, LogSoftmax, LayerNorm ===//
//
// Like the forward kernels, each views its input as [outer, D, inner] with the
// statistic taken over D; row sums are accumulated in double, elementwise work
// is done in the compute type (float for the 16-bit floats) and rounded once.
//
//===----------------------------------------------------------------------===//
#include "../KernelUtil.h"
#include "../RowStats.h"
#include "../Kernels.h"
#include "zinc/runtime/cpu/RowMath.h"
#include "llvm/ADT/Twine.h"
#include <algorithm>
#include <cmath>

namespace zinc::cpu {

/// Below this many elements thread start-up costs more than it saves.
static constexpr int64_t kParallelMin = int64_t(1) << 15;
/// Columns handled together when the normalised axis is not innermost.
static constexpr int64_t kColumnBlock = 64;

/// Checks that every given tensor is a float of x's type and shape.
static llvm::Error checkSameFloat(
    const KernelCall &call,
    std::initializer_list<std::pair<const TensorRef *, const char *>> tensors) {
  const TensorRef *x = tensors.begin()->first;
  for (const auto &[t, what] : tensors) {
    if (!t)
      return kernelError(call.opType + ": missing " + what);
    if (!isFloatDType(t->dtype) || t->dtype != x->dtype || t->shape != x->shape)
      return kernelError(call.opType + ": " + what + " is " +
                         dtypeName(t->dtype) + formatShape(t->shape) +
                         ", expected a float tensor like " +
                         dtypeName(x->dtype) + formatShape(x->shape));
  }
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// SoftmaxGrad and LogSoftmaxGrad
//===----------------------------------------------------------------------===//

/// Softmax:    dx = y * (dy - sum(dy * y))
/// LogSoftmax: dx = dy - exp(y) * sum(dy)
/// over `len` columns of [d, inner] at a time (len = inner = 1 for a row).
template <bool isLog, typename T>
static void softmaxGradColumns(const T *y, const T *dy, T *dx, int64_t d,
                               int64_t inner, int64_t len) {
  using C = ComputeT<T>;
  double sum[kColumnBlock] = {};
  for (int64_t j = 0; j < d; ++j)
    for (int64_t i = 0; i < len; ++i) {
      int64_t k = j * inner + i;
      double g = static_cast<double>(load(dy[k]));
      sum[i] += isLog ? g : g * static_cast<double>(load(y[k]));
    }
  for (int64_t j = 0; j < d; ++j)
    for (int64_t i = 0; i < len; ++i) {
      int64_t k = j * inner + i;
      C yv = load(y[k]), g = load(dy[k]), s = static_cast<C>(sum[i]);
      if constexpr (isLog)
        dx[k] = store<T>(g - std::exp(yv) * s);
      else
        dx[k] = store<T>(yv * (g - s));
    }
}

/// The same on one contiguous row, the common case (the last axis).
template <bool isLog, typename T>
static void softmaxGradRow(const T *y, const T *dy, T *dx, int64_t d) {
  if constexpr (!isLog && std::is_same_v<T, float>) {
    if (d >= kRowMathMinRow) {
      const RowMath &rm = rowMath();
      rm.softmaxGrad(y, dy, dx, d, rm.dot(dy, y, d));
      return;
    }
  }
  using C = ComputeT<T>;
  double sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < d; ++j) {
    double g = static_cast<double>(load(dy[j]));
    sum += isLog ? g : g * static_cast<double>(load(y[j]));
  }
  C s = static_cast<C>(sum);
  for (int64_t j = 0; j < d; ++j) {
    C yv = load(y[j]), g = load(dy[j]);
    if constexpr (isLog)
      dx[j] = store<T>(g - std::exp(yv) * s);
    else
      dx[j] = store<T>(yv * (g - s));
  }
}

/// Inputs (y, dy), output dx; attributes `axis` (non-negative) and
/// `flatten` (1: the opset < 13 form, normalised over all axes from `axis`).
template <bool isLog>
static llvm::Error runSoftmaxGradFamily(const KernelCall &call) {
  const TensorRef *y = call.input(0), *dy = call.input(1);
  TensorRef *dx = call.output(0);
  if (auto err = checkSameFloat(
          call,
          {{y, "input 0 (y)"}, {dy, "input 1 (dy)"}, {dx, "output 0 (dx)"}}))
    return err;
  bool flatten = call.attrs.getInt("flatten", 0) != 0;
  auto geometry =
      softmaxGeometry(y->shape, call.attrs.getInt("axis", flatten ? 1 : -1), flatten);
  if (!geometry)
    return geometry.takeError();
  int64_t outer = geometry->outer, d = geometry->d, inner = geometry->inner;
  if (outer * d * inner == 0)
    return llvm::Error::success();
  bool parallel = outer * d * inner >= kParallelMin;

  visitDType(y->dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (isFloatStorage<T>()) {
      const T *py = y->as<const T>(), *pdy = dy->as<const T>();
      T *pdx = dx->as<T>();
      if (inner == 1) {
        parallelFor(outer, parallel, [&](int64_t o) {
          softmaxGradRow<isLog>(py + o * d, pdy + o * d, pdx + o * d, d);
        });
        return;
      }
      int64_t blocks = (inner + kColumnBlock - 1) / kColumnBlock;
      parallelFor(outer * blocks, parallel, [&](int64_t task) {
        int64_t o = task / blocks, i0 = (task % blocks) * kColumnBlock;
        int64_t off = o * d * inner + i0;
        softmaxGradColumns<isLog>(py + off, pdy + off, pdx + off, d, inner,
                                  std::min(kColumnBlock, inner - i0));
      });
    }
  });
  return llvm::Error::success();
}

llvm::Error runSoftmaxGrad(const KernelCall &call) {
  return runSoftmaxGradFamily<false>(call);
}
llvm::Error runLogSoftmaxGrad(const KernelCall &call) {
  return runSoftmaxGradFamily<true>(call);
}

//===----------------------------------------------------------------------===//
// LayerNormalizationGrad
//===----------------------------------------------------------------------===//

/// Strides that read Scale or B (or accumulate into their gradients) at the
/// indices of the normalised shape `norm`, under the forward kernel's
/// broadcasting: leading 1s beyond norm's rank are ignored, the rest must
/// broadcast to `norm` exactly.
static llvm::Expected<llvm::SmallVector<int64_t, 6>>
affineStrides(const TensorRef &t, llvm::ArrayRef<int64_t> norm,
              llvm::StringRef what) {
  llvm::ArrayRef<int64_t> shape = t.shape;
  while (!shape.empty() && shape.front() == 1 && shape.size() > norm.size())
    shape = shape.drop_front();
  auto b = broadcastShapes(shape, norm);
  if (!b || shape.size() > norm.size() || llvm::ArrayRef<int64_t>(*b) != norm) {
    if (!b)
      llvm::consumeError(b.takeError());
    return kernelError("unsupported: LayerNormalizationGrad with " + what +
                       " of shape " + formatShape(t.shape) +
                       " for normalised shape " + formatShape(norm));
  }
  return broadcastStrides(shape, norm);
}

/// Reads `n` statistics (Mean or InvStdDev) of any float type as double
/// into `out`.
static llvm::Error loadStats(const TensorRef &t, int64_t n,
                             llvm::StringRef what, double *out) {
  if (!isFloatDType(t.dtype) || t.numElements() != n)
    return kernelError("LayerNormalizationGrad: " + what + " is " +
                       dtypeName(t.dtype) + formatShape(t.shape) +
                       ", expected " + llvm::Twine(n) + " float elements");
  visitDType(t.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (isFloatStorage<T>())
      for (int64_t i = 0; i < n; ++i)
        out[i] = static_cast<double>(load(t.as<const T>()[i]));
  });
  return llvm::Error::success();
}

/// Inputs (dy, x, scale, [mean, invstd]), outputs (dx, dscale, [dbias]);
/// attributes axis and epsilon as on the forward node. With xhat = (x -
/// mean) * invstd and g = dy * scale, per row:
///   dx = invstd * (g - mean(g) - xhat * mean(g * xhat)),
/// and over the rows: dscale = sum(dy * xhat), dbias = sum(dy), each then
/// summed over the axes along which Scale / B were broadcast.
llvm::Error runLayerNormalizationGrad(const KernelCall &call) {
  const TensorRef *dy = call.input(0), *x = call.input(1);
  const TensorRef *scale = call.input(2);
  const TensorRef *meanIn = call.input(3), *invStdIn = call.input(4);
  TensorRef *dx = call.output(0), *dscale = call.output(1),
            *dbias = call.output(2);
  if (auto err = checkSameFloat(
          call,
          {{x, "input 1 (x)"}, {dy, "input 0 (dy)"}, {dx, "output 0 (dx)"}}))
    return err;
  if (!scale || !dscale)
    return kernelError("LayerNormalizationGrad: missing scale or its gradient");
  if (scale->dtype != x->dtype || dscale->dtype != x->dtype ||
      dscale->shape != scale->shape || (dbias && dbias->dtype != x->dtype))
    return kernelError("LayerNormalizationGrad: scale and the scale/bias "
                       "gradients must be " +
                       llvm::Twine(dtypeName(x->dtype)) +
                       ", the scale gradient of the scale's shape");
  if (static_cast<bool>(meanIn) != static_cast<bool>(invStdIn))
    return kernelError("LayerNormalizationGrad: mean and invstd must be given "
                       "together");
  auto axisOr = normalizeAxis(call.attrs.getInt("axis", -1), x->rank());
  if (!axisOr)
    return axisOr.takeError();
  llvm::ArrayRef<int64_t> shape = x->shape;
  int64_t axis = std::min<int64_t>(*axisOr, shape.size());
  llvm::ArrayRef<int64_t> norm = shape.drop_front(axis);
  int64_t outer = numElements(shape.take_front(axis));
  int64_t d = numElements(norm);
  double epsilon = call.attrs.getFloat("epsilon", 1e-5);
  auto scaleStrides = affineStrides(*scale, norm, "Scale");
  if (!scaleStrides)
    return scaleStrides.takeError();
  llvm::SmallVector<int64_t, 6> biasStrides;
  if (dbias) {
    auto s = affineStrides(*dbias, norm, "B");
    if (!s)
      return s.takeError();
    biasStrides = std::move(*s);
  }
  llvm::SmallVector<int64_t, 6> normStrides = contiguousStrides(norm);

  // Workspace: the row statistics, Scale over the normalised shape in the
  // compute type, the column sums and one buffer to reduce them into.
  auto means = call.scratch<double>(outer);
  if (!means)
    return means.takeError();
  auto invStd = call.scratch<double>(outer);
  if (!invStd)
    return invStd.takeError();
  if (meanIn) {
    if (auto err = loadStats(*meanIn, outer, "mean", *means))
      return err;
    if (auto err = loadStats(*invStdIn, outer, "invstd", *invStd))
      return err;
  }
  bool parallel = outer * d >= kParallelMin;
  size_t work = x->byteSize() * 3;

  return visitDType(x->dtype, [&](auto tag) -> llvm::Error {
    using T = decltype(tag);
    if constexpr (isFloatStorage<T>()) {
      using C = ComputeT<T>;
      auto gOr = call.scratch<C>(d);
      if (!gOr)
        return gOr.takeError();
      auto accScaleOr = call.scratch<double>(d);
      if (!accScaleOr)
        return accScaleOr.takeError();
      auto accBiasOr = call.scratch<double>(dbias ? d : 0);
      if (!accBiasOr)
        return accBiasOr.takeError();
      auto sumsOr = call.scratch<double>(
          std::max(dscale->numElements(), dbias ? dbias->numElements() : 0));
      if (!sumsOr)
        return sumsOr.takeError();
      C *g = *gOr;
      double *accScale = *accScaleOr, *accBias = *accBiasOr, *sums = *sumsOr;
      double *pm = *means, *ps = *invStd;
      const T *px = x->as<const T>(), *pdy = dy->as<const T>();
      T *pdx = dx->as<T>();
      // Scale over the normalised shape, in the compute type.
      const T *pscale = scale->as<const T>();
      forEachStrided<2>(norm, {*scaleStrides, normStrides},
                        [&](const std::array<int64_t, 2> &off) {
                          g[off[1]] = load(pscale[off[0]]);
                        });

      parallelFor(outer, parallel, [&](int64_t o) {
        const T *xr = px + o * d, *dyr = pdy + o * d;
        if (!meanIn) {
          // As the forward kernel computes them, to the last bit.
          RowStats stats = rowStats(xr, d, epsilon);
          pm[o] = stats.mean;
          ps[o] = stats.invStd;
        }
        if constexpr (std::is_same_v<T, float>) {
          if (d >= kRowMathMinRow) {
            rowMath().layerNormGrad(xr, dyr, g, pdx + o * d, d,
                                    static_cast<float>(pm[o]),
                                    static_cast<float>(ps[o]));
            return;
          }
        }
        C m = static_cast<C>(pm[o]), s = static_cast<C>(ps[o]);
        double sumG = 0, sumGX = 0;
        for (int64_t j = 0; j < d; ++j) {
          C gj = load(dyr[j]) * g[j];
          C xhat = (load(xr[j]) - m) * s;
          sumG += static_cast<double>(gj);
          sumGX += static_cast<double>(gj) * static_cast<double>(xhat);
        }
        C meanG = static_cast<C>(d ? sumG / d : 0);
        C meanGX = static_cast<C>(d ? sumGX / d : 0);
        T *dxr = pdx + o * d;
        for (int64_t j = 0; j < d; ++j) {
          C xhat = (load(xr[j]) - m) * s;
          dxr[j] = store<T>(s * (load(dyr[j]) * g[j] - meanG - xhat * meanGX));
        }
      });

      // Column sums over the rows; each column is summed by one thread in
      // row order, so the result does not depend on the thread count.
      std::fill(accScale, accScale + d, 0.0);
      if (dbias)
        std::fill(accBias, accBias + d, 0.0);
      parallelRanges(d, work, [&](int64_t j0, int64_t j1) {
        if constexpr (std::is_same_v<T, float>) {
          if (d >= kRowMathMinRow) {
            const RowMath &rm = rowMath();
            for (int64_t o = 0; o < outer; ++o)
              rm.layerNormParamGrad(px + o * d + j0, pdy + o * d + j0, j1 - j0,
                                    static_cast<float>(pm[o]),
                                    static_cast<float>(ps[o]), accScale + j0,
                                    dbias ? accBias + j0 : nullptr);
            return;
          }
        }
        for (int64_t o = 0; o < outer; ++o) {
          const T *xr = px + o * d, *dyr = pdy + o * d;
          double m = pm[o], s = ps[o];
          for (int64_t j = j0; j < j1; ++j) {
            double gy = static_cast<double>(load(dyr[j]));
            accScale[j] += gy * (static_cast<double>(load(xr[j])) - m) * s;
            if (dbias)
              accBias[j] += gy;
          }
        }
      });
      auto reduceInto = [&](TensorRef &out, llvm::ArrayRef<int64_t> strides,
                            const double *acc) {
        int64_t count = out.numElements();
        std::fill(sums, sums + count, 0.0);
        forEachStrided<2>(norm, {strides, normStrides},
                          [&](const std::array<int64_t, 2> &off) {
                            sums[off[0]] += acc[off[1]];
                          });
        T *p = out.as<T>();
        for (int64_t i = 0; i < count; ++i)
          p[i] = store<T>(sums[i]);
      };
      reduceInto(*dscale, *scaleStrides, accScale);
      if (dbias)
        reduceInto(*dbias, biasStrides, accBias);
    }
    return llvm::Error::success();
  });
}

} // namespace zinc::cpu
