//===- BatchNormMath.h - Batch normalisation math, host and device --------===//
//
// The arithmetic of the cuda BatchNormalization and BatchNormalizationGrad
// kernels, written once for the GPU and for host tests that compare it with
// the cpu kernels (runtime/cpu/kernels/BatchNorm.cpp, grad/BatchNormGrad.cpp):
// the same operations in the same order and precision (float where the cpu
// computes in ComputeT, double where it computes in double), each product
// explicitly rounded so that nvcc cannot fuse it with an add (the cpu kernels
// are not built with FMA). Only the order of the per-channel double sums
// differs from the cpu's, which after rounding to float almost never shows.
//
// And the geometry: which values of x [N, C, S...] each block of a
// per-channel reduction adds (a channel's n = N * S values split into a few
// chunks by the shape alone, so the sums are the same on every run and every
// GPU), and which elements each block of the elementwise kernels writes.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_CUDA_KERNELS_BATCHNORMMATH_H
#define ZINC_RUNTIME_CUDA_KERNELS_BATCHNORMMATH_H

#include "HostDevice.h"
#include "TrainingMath.h"
#include <math.h>
#include <stdint.h>

namespace zinc::cuda {

//===----------------------------------------------------------------------===//
// Double operations that are never fused
//===----------------------------------------------------------------------===//

ZINC_HD double dmulRn(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
ZINC_HD double daddRn(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}

//===----------------------------------------------------------------------===//
// Geometry
//===----------------------------------------------------------------------===//

/// Blocks a per-channel reduction aims for in all (an H100 runs about this
/// many 256-thread blocks at once), values one block adds at least, and
/// blocks per channel at most (the second pass adds their sums in order).
constexpr int64_t kBatchNormTargetBlocks = 1024;
constexpr int64_t kBatchNormMinChunk = 4096;
constexpr int64_t kBatchNormMaxSplits = 128;
/// Planes at least this long are read as contiguous runs; shorter ones
/// (BatchNorm1d's [N, C], 7x7 maps) element by element.
constexpr int64_t kBatchNormMinRun = 64;

/// x as [batch, channels, inner]; channel c's values k in [0, count) are
/// k = n * inner + i, at offset (n * channels + c) * inner + i. Block s of a
/// channel adds values [s * chunk, min((s + 1) * chunk, count)).
struct ChannelSplit {
  int64_t batch = 0, channels = 0, inner = 0;
  int64_t count = 0;  ///< batch * inner
  int64_t splits = 1; ///< blocks per channel, none of them empty
  int64_t chunk = 0;  ///< values per block (the last may have fewer)
};

/// The split of x [batch, channels, inner]: from the shape alone, so the
/// order of every sum is fixed.
inline ChannelSplit planChannelSplit(int64_t batch, int64_t channels,
                                     int64_t inner) {
  ChannelSplit g;
  g.batch = batch;
  g.channels = channels;
  g.inner = inner;
  g.count = batch * inner;
  int64_t bySize = (g.count + kBatchNormMinChunk - 1) / kBatchNormMinChunk;
  int64_t byBlocks =
      channels > 0 ? (kBatchNormTargetBlocks + channels - 1) / channels : 1;
  int64_t splits = bySize < byBlocks ? bySize : byBlocks;
  splits = splits < 1                     ? 1
           : splits > kBatchNormMaxSplits ? kBatchNormMaxSplits
                                          : splits;
  g.chunk = g.count > 0 ? (g.count + splits - 1) / splits : 0;
  g.splits = g.chunk > 0 ? (g.count + g.chunk - 1) / g.chunk : 1;
  return g;
}

/// The offset in x of channel c's value k.
ZINC_HD int64_t channelValueOffset(const ChannelSplit &g, int64_t c,
                                   int64_t k) {
  int64_t n = k / g.inner;
  return (n * g.channels + c) * g.inner + (k - n * g.inner);
}

/// Calls fn(offset) for each value of channel c that thread `thread` of
/// `threads` adds in block s, in the order it adds them: along contiguous
/// runs of long planes, else value by value.
template <typename Fn>
ZINC_HD void forChannelValues(const ChannelSplit &g, int64_t c, int64_t s,
                              int64_t thread, int64_t threads, Fn &&fn) {
  int64_t begin = s * g.chunk;
  int64_t end = begin + g.chunk < g.count ? begin + g.chunk : g.count;
  if (g.inner < kBatchNormMinRun) {
    for (int64_t k = begin + thread; k < end; k += threads)
      fn(channelValueOffset(g, c, k));
    return;
  }
  int64_t n = begin / g.inner, i = begin - n * g.inner;
  for (int64_t k = begin; k < end; ++n, i = 0) {
    int64_t run = g.inner - i < end - k ? g.inner - i : end - k;
    int64_t base = (n * g.channels + c) * g.inner + i;
    for (int64_t j = thread; j < run; j += threads)
      fn(base + j);
    k += run;
  }
}

/// The elementwise kernels' view of x: `planes` = batch * params planes of
/// `inner` elements, plane q using parameter q % params. Long planes go in
/// tiles of `tile` elements, one tile per block at a time (a division per
/// tile, not per element); short ones element by element.
struct PlaneTiles {
  int64_t planes = 0, params = 0, inner = 0;
  int64_t tile = 0;          ///< elements per tile; 0: element by element
  int64_t tilesPerPlane = 0; ///< when tiled
  int64_t units = 0;         ///< tiles, or elements

  ZINC_HD bool tiled() const { return tile > 0; }
};

inline PlaneTiles planPlaneTiles(int64_t planes, int64_t params, int64_t inner,
                                 int64_t tile) {
  PlaneTiles t;
  t.planes = planes;
  t.params = params;
  t.inner = inner;
  if (inner >= kBatchNormMinRun) {
    t.tile = tile;
    t.tilesPerPlane = (inner + tile - 1) / tile;
    t.units = planes * t.tilesPerPlane;
  } else {
    t.units = planes * inner;
  }
  return t;
}

/// Calls fn(element, param) for every element that thread `thread` of
/// `threads` in block `block` of `blocks` writes (grid-stride over units).
template <typename Fn>
ZINC_HD void forPlaneElements(const PlaneTiles &t, int64_t block,
                              int64_t blocks, int64_t thread, int64_t threads,
                              Fn &&fn) {
  if (!t.tiled()) {
    for (int64_t e = block * threads + thread; e < t.units;
         e += blocks * threads)
      fn(e, (e / t.inner) % t.params);
    return;
  }
  for (int64_t u = block; u < t.units; u += blocks) {
    int64_t plane = u / t.tilesPerPlane;
    int64_t begin = (u - plane * t.tilesPerPlane) * t.tile;
    int64_t end = begin + t.tile < t.inner ? begin + t.tile : t.inner;
    int64_t p = plane % t.params;
    for (int64_t j = begin + thread; j < end; j += threads)
      fn(plane * t.inner + j, p);
  }
}

//===----------------------------------------------------------------------===//
// BatchNormalization, inference
//===----------------------------------------------------------------------===//

/// Y = (X - mean) * mul + bias for one parameter, mul = scale / sqrt(var +
/// epsilon) in double, each then rounded to float.
struct BatchNormAffine {
  float mean = 0, mul = 0, bias = 0;
};

ZINC_HD BatchNormAffine inferenceAffine(double scale, double bias, double mean,
                                        double var, double epsilon) {
  double mul = scale / sqrt(var + epsilon);
  return {static_cast<float>(mean), static_cast<float>(mul),
          static_cast<float>(bias)};
}

/// Subtracting the mean first, as the cpu does.
ZINC_HD float inferenceValue(float x, const BatchNormAffine &a) {
  return addRn(mulRn(subRn(x, a.mean), a.mul), a.bias);
}

//===----------------------------------------------------------------------===//
// BatchNormalization, training
//===----------------------------------------------------------------------===//

/// The batch mean from the channel's sum, rounded to float (PyTorch's).
ZINC_HD float batchMean(double sum, int64_t count) {
  return static_cast<float>(sum / static_cast<double>(count));
}

/// One value's term of the variance sum, squared in float.
ZINC_HD float squaredDeviation(float x, float mean) {
  float d = subRn(x, mean);
  return mulRn(d, d);
}

/// What training mode derives for one channel: y = x * alpha + beta, the
/// outputs 1-4 (running mean and variance, batch mean, inverse deviation).
struct BatchNormChannel {
  float alpha = 0, beta = 0;
  double runningMean = 0, runningVar = 0, batchMean = 0, invStd = 0;
};

/// From the batch mean and the sum of squared deviations (rounded to float
/// as the cpu rounds it), the parameters and the running statistics; the
/// running variance takes the unbiased variance, as PyTorch's update does.
ZINC_HD BatchNormChannel trainingChannel(float mean, float varSum,
                                         int64_t count, double scale,
                                         double bias, double runningMean,
                                         double runningVar, double epsilon,
                                         double momentum) {
  BatchNormChannel ch;
  double popVar = static_cast<double>(varSum) / static_cast<double>(count);
  float inv = static_cast<float>(1 / sqrt(popVar + epsilon));
  float a = mulRn(inv, static_cast<float>(scale));
  ch.alpha = a;
  ch.beta = subRn(static_cast<float>(bias), mulRn(mean, a));
  ch.batchMean = static_cast<double>(mean);
  ch.invStd = static_cast<double>(inv);
  ch.runningMean = daddRn(dmulRn(momentum, runningMean),
                          dmulRn(1 - momentum, static_cast<double>(mean)));
  double unbiased =
      static_cast<double>(varSum) / static_cast<double>(count - 1);
  ch.runningVar =
      daddRn(dmulRn(momentum, runningVar), dmulRn(1 - momentum, unbiased));
  return ch;
}

ZINC_HD float trainingValue(float x, float alpha, float beta) {
  return addRn(mulRn(x, alpha), beta);
}

//===----------------------------------------------------------------------===//
// BatchNormalizationGrad
//===----------------------------------------------------------------------===//

/// One value's term of the recomputed variance sum, in double (the
/// gradient's statistics are never rounded to float).
ZINC_HD double squaredDeviationD(double x, double mean) {
  double d = x - mean;
  return dmulRn(d, d);
}

/// 1 / sqrt(var + epsilon) of the recomputed statistics.
ZINC_HD double recomputedInvStd(double squares, int64_t count, double epsilon) {
  return 1 / sqrt(squares / static_cast<double>(count) + epsilon);
}

/// dy * xhat for one value, in double: dy * (x - mean) * invStd.
ZINC_HD double dyXhat(double dy, double x, double mean, double invStd) {
  return dmulRn(dmulRn(dy, x - mean), invStd);
}

/// What dx needs of one channel, in float:
/// dx = scaleInv * (dy - meanDy - xhat * meanDyXhat),
/// xhat = (x - mean) * invStd.
struct BatchNormGradChannel {
  float scaleInv = 0, meanDy = 0, meanDyXhat = 0, mean = 0, invStd = 0;
};

ZINC_HD BatchNormGradChannel gradChannel(double scale, double mean,
                                         double invStd, double sumDy,
                                         double sumDyXhat, int64_t count) {
  double n = static_cast<double>(count);
  BatchNormGradChannel k;
  k.scaleInv = static_cast<float>(dmulRn(scale, invStd));
  k.meanDy = static_cast<float>(sumDy / n);
  k.meanDyXhat = static_cast<float>(sumDyXhat / n);
  k.mean = static_cast<float>(mean);
  k.invStd = static_cast<float>(invStd);
  return k;
}

ZINC_HD float gradValue(float x, float dy, const BatchNormGradChannel &k) {
  float xhat = mulRn(subRn(x, k.mean), k.invStd);
  return mulRn(k.scaleInv,
               subRn(subRn(dy, k.meanDy), mulRn(xhat, k.meanDyXhat)));
}

} // namespace zinc::cuda

#endif
