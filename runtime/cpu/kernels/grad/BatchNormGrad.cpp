//===- BatchNormGrad.cpp - Gradient of training-mode BatchNormalization ---===//
//
// zinc.BatchNormalizationGrad(dy, x, scale, [mean, invstd]) -> dx, dscale,
// dbias, attribute epsilon as on the forward node. Per channel c of
// x [N, C, S...], over its n = N * S values, with xhat = (x - mean) * invstd
// (the batch statistics the forward normalised with):
//   dbias  = sum(dy),   dscale = sum(dy * xhat),
//   dx     = scale * invstd * (dy - dbias / n - xhat * dscale / n),
// the full gradient through the batch mean and variance. The statistics are
// recomputed from x when the forward's are not given. Sums in double,
// elementwise work in the compute type; five per-channel arrays of doubles
// in the call's workspace.
//
//===----------------------------------------------------------------------===//
#include "../KernelUtil.h"
#include "../Kernels.h"
#include "llvm/ADT/Twine.h"
#include <cmath>

namespace zinc::cpu {

/// Below this many elements the kernel runs on one thread.
static constexpr int64_t kParallelWork = 1 << 16;

/// `t`'s values (any float type) into `out`.
static void loadFloats(const TensorRef &t, double *out) {
  visitDType(t.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (isFloatStorage<T>()) {
      const T *p = t.as<const T>();
      for (int64_t i = 0; i < t.numElements(); ++i)
        out[i] = static_cast<double>(load(p[i]));
    }
  });
}

static void storeFloats(TensorRef &t, const double *values) {
  visitDType(t.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (isFloatStorage<T>()) {
      T *p = t.as<T>();
      for (int64_t i = 0; i < t.numElements(); ++i)
        p[i] = store<T>(static_cast<ComputeT<T>>(values[i]));
    }
  });
}

template <typename T>
static void batchNormGrad(const T *dy, const T *x, T *dx, int64_t batch,
                          int64_t channels, int64_t inner, bool haveStats,
                          double epsilon, const double *scale, double *mean,
                          double *invStd, double *sumDy, double *sumDyXhat) {
  using C = ComputeT<T>;
  double count = static_cast<double>(batch * inner);
  bool big = batch * channels * inner > kParallelWork;
  parallelFor(channels, big, [&](int64_t c) {
    auto plane = [&](int64_t n) { return (n * channels + c) * inner; };
    if (!haveStats) {
      double sum = 0, sq = 0;
      for (int64_t n = 0; n < batch; ++n)
        for (int64_t i = 0; i < inner; ++i)
          sum += static_cast<double>(load(x[plane(n) + i]));
      double m = sum / count;
      for (int64_t n = 0; n < batch; ++n)
        for (int64_t i = 0; i < inner; ++i) {
          double d = static_cast<double>(load(x[plane(n) + i])) - m;
          sq += d * d;
        }
      mean[c] = m;
      invStd[c] = 1 / std::sqrt(sq / count + epsilon);
    }
    double m = mean[c], inv = invStd[c], sdy = 0, sdyx = 0;
    for (int64_t n = 0; n < batch; ++n)
      for (int64_t i = 0; i < inner; ++i) {
        double g = static_cast<double>(load(dy[plane(n) + i]));
        sdy += g;
        sdyx += g * (static_cast<double>(load(x[plane(n) + i])) - m) * inv;
      }
    sumDy[c] = sdy;
    sumDyXhat[c] = sdyx;
    if (!dx)
      return;
    C a = static_cast<C>(scale[c] * inv), meanDy = static_cast<C>(sdy / count),
      meanDyXhat = static_cast<C>(sdyx / count), cm = static_cast<C>(m),
      ci = static_cast<C>(inv);
    for (int64_t n = 0; n < batch; ++n)
      for (int64_t i = 0; i < inner; ++i) {
        int64_t k = plane(n) + i;
        C xhat = (load(x[k]) - cm) * ci;
        dx[k] = store<T>(a * (load(dy[k]) - meanDy - xhat * meanDyXhat));
      }
  });
}

llvm::Error runBatchNormalizationGrad(const KernelCall &call) {
  const TensorRef *dy = call.input(0), *x = call.input(1),
                  *scale = call.input(2), *meanIn = call.input(3),
                  *invStdIn = call.input(4);
  TensorRef *dx = call.output(0), *dscale = call.output(1),
            *dbias = call.output(2);
  if (!dy || !x || !scale)
    return kernelError("BatchNormalizationGrad: needs inputs dy, x and scale");
  if (!isFloatDType(x->dtype) || dy->dtype != x->dtype ||
      dy->shape != x->shape || x->rank() < 2)
    return kernelError("BatchNormalizationGrad: dy " + dtypeName(dy->dtype) +
                       formatShape(dy->shape) + " and x " +
                       dtypeName(x->dtype) + formatShape(x->shape) +
                       " must be the same float type and shape [N, C, ...]");
  if (dx && (dx->dtype != x->dtype || dx->shape != x->shape))
    return kernelError("BatchNormalizationGrad: dx must be like x");
  if (static_cast<bool>(meanIn) != static_cast<bool>(invStdIn))
    return kernelError("BatchNormalizationGrad: mean and invstd must be given "
                       "together");
  int64_t batch = x->shape[0], channels = x->shape[1];
  int64_t inner = numElements(llvm::ArrayRef<int64_t>(x->shape).drop_front(2));
  for (const TensorRef *t :
       {scale, meanIn, invStdIn, static_cast<const TensorRef *>(dscale),
        static_cast<const TensorRef *>(dbias)})
    if (t && (!isFloatDType(t->dtype) || t->numElements() != channels))
      return kernelError("BatchNormalizationGrad: per-channel tensor " +
                         dtypeName(t->dtype) + formatShape(t->shape) +
                         " does not have " + llvm::Twine(channels) +
                         " float elements");
  if (batch * inner == 0)
    return kernelError("BatchNormalizationGrad: no values per channel in " +
                       formatShape(x->shape));

  // scale, mean, invStd, sumDy, sumDyXhat.
  double *arrays[5];
  for (double *&a : arrays) {
    auto p = call.scratch<double>(channels);
    if (!p)
      return p.takeError();
    a = *p;
  }
  double *s = arrays[0], *mean = arrays[1], *invStd = arrays[2],
         *sumDy = arrays[3], *sumDyXhat = arrays[4];
  loadFloats(*scale, s);
  bool haveStats = meanIn != nullptr;
  if (haveStats) {
    loadFloats(*meanIn, mean);
    loadFloats(*invStdIn, invStd);
  }
  double epsilon = call.attrs.getFloat("epsilon", 1e-5);
  visitDType(x->dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (isFloatStorage<T>())
      batchNormGrad<T>(dy->as<const T>(), x->as<const T>(),
                       dx ? dx->as<T>() : nullptr, batch, channels, inner,
                       haveStats, epsilon, s, mean, invStd, sumDy, sumDyXhat);
  });
  if (dscale)
    storeFloats(*dscale, sumDyXhat);
  if (dbias)
    storeFloats(*dbias, sumDy);
  return llvm::Error::success();
}

} // namespace zinc::cpu
