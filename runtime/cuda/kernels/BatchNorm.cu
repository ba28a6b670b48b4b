//===- BatchNorm.cu - BatchNormalization and its gradient on the GPU ------===//
//
// The cuda counterparts of runtime/cpu/kernels/BatchNorm.cpp and
// grad/BatchNormGrad.cpp, with their attributes, outputs (zinc's batch mean
// and inverse deviation as outputs 3 and 4, PyTorch's unbiased running
// variance) and messages; the per-element and per-channel math is
// BatchNormMath.h's, shared with the host tests.
//
// Per-channel sums are in double, as on the cpu. Each channel's values are
// split into a few chunks by the shape alone (ChannelSplit); one block adds
// a chunk in a fixed order into the call's scratch, and the next pass adds
// the chunks' sums in order. No atomics: every result is the same on every
// run. The running statistics and the other per-channel outputs are written
// by one block after all of its threads have read the inputs, so an output
// may share memory with the input it replaces, as on the cpu.
//
// Scratch: inference three floats per parameter; training two doubles per
// chunk and six values per channel; the gradient up to four doubles per
// chunk and a few values per channel.
//
//===----------------------------------------------------------------------===//
#include "BatchNormMath.h"
#include "BlockReduce.cuh"
#include "CudaKernels.h"
#include "DeviceTypes.cuh"
#include "zinc/runtime/cuda/CudaCheck.h"
#include "llvm/ADT/Twine.h"
#include <algorithm>
#include <cstdint>

namespace zinc::cuda {
namespace {

using llvm::Error;
using llvm::Twine;

constexpr unsigned kThreads = 256;
/// Elements of a plane one block of an elementwise kernel takes at a time.
constexpr int64_t kTile = 4 * kThreads;

//===----------------------------------------------------------------------===//
// Device helpers
//===----------------------------------------------------------------------===//

/// A per-channel tensor of any float type (opset 15 lets scale, B, mean and
/// var differ from X); null data for an absent output.
enum class ParamKind : int { F32, F16, BF16, F64 };

struct ParamRef {
  void *data = nullptr;
  ParamKind kind = ParamKind::F32;
};

__device__ __forceinline__ double loadParam(const ParamRef &p, int64_t i) {
  switch (p.kind) {
  case ParamKind::F16:
    return __half2float(static_cast<const __half *>(p.data)[i]);
  case ParamKind::BF16:
    return __bfloat162float(static_cast<const __nv_bfloat16 *>(p.data)[i]);
  case ParamKind::F64:
    return static_cast<const double *>(p.data)[i];
  default:
    return static_cast<const float *>(p.data)[i];
  }
}

/// As the cpu's store: through float (the compute type) except for f64.
__device__ __forceinline__ void storeParam(const ParamRef &p, int64_t i,
                                           double v) {
  if (!p.data)
    return;
  switch (p.kind) {
  case ParamKind::F16:
    static_cast<__half *>(p.data)[i] = __float2half_rn(static_cast<float>(v));
    return;
  case ParamKind::BF16:
    static_cast<__nv_bfloat16 *>(p.data)[i] =
        __float2bfloat16_rn(static_cast<float>(v));
    return;
  case ParamKind::F64:
    static_cast<double *>(p.data)[i] = v;
    return;
  default:
    static_cast<float *>(p.data)[i] = static_cast<float>(v);
  }
}

/// Channel c's total of its chunks' sums, in chunk order: every pass that
/// needs it gets the same bits.
__device__ __forceinline__ double
channelTotal(const double *partial, const ChannelSplit &g, int64_t c) {
  double total = 0;
  for (int64_t s = 0; s < g.splits; ++s)
    total += partial[c * g.splits + s];
  return total;
}

//===----------------------------------------------------------------------===//
// Per-channel sums (grid: channels x splits)
//===----------------------------------------------------------------------===//

/// partial[c, s] = the sum of x over block (c, s)'s values.
template <typename T>
__global__ void channelSumKernel(const T *__restrict__ x, ChannelSplit g,
                                 double *__restrict__ partial) {
  __shared__ double shared[32];
  int64_t c = blockIdx.x, s = blockIdx.y;
  double sum = 0;
  forChannelValues(g, c, s, threadIdx.x, blockDim.x,
                   [&](int64_t o) { sum += static_cast<double>(loadF(x[o])); });
  sum = blockSumToThread0(sum, shared);
  if (threadIdx.x == 0)
    partial[c * g.splits + s] = sum;
}

/// partial[c, s] = the sum of squared deviations from the channel's mean
/// (from `sums`) over block (c, s)'s values: the forward's, with the mean
/// and each deviation in float (FloatMean), or the gradient's, in double.
template <typename T, bool FloatMean>
__global__ void channelSquaresKernel(const T *__restrict__ x, ChannelSplit g,
                                     const double *__restrict__ sums,
                                     double *__restrict__ partial) {
  __shared__ double shared[32];
  __shared__ double mean;
  int64_t c = blockIdx.x, s = blockIdx.y;
  if (threadIdx.x == 0) {
    double total = channelTotal(sums, g, c);
    mean = FloatMean ? static_cast<double>(batchMean(total, g.count))
                     : total / static_cast<double>(g.count);
  }
  __syncthreads();
  double m = mean, sq = 0;
  forChannelValues(g, c, s, threadIdx.x, blockDim.x, [&](int64_t o) {
    if constexpr (FloatMean)
      sq += static_cast<double>(
          squaredDeviation(loadF(x[o]), static_cast<float>(m)));
    else
      sq += squaredDeviationD(static_cast<double>(loadF(x[o])), m);
  });
  sq = blockSumToThread0(sq, shared);
  if (threadIdx.x == 0)
    partial[c * g.splits + s] = sq;
}

//===----------------------------------------------------------------------===//
// BatchNormalization kernels
//===----------------------------------------------------------------------===//

/// Per parameter p: the float mean, multiplier and bias of inference mode.
__global__ void inferenceParamsKernel(int64_t params, ParamRef scale,
                                      ParamRef bias, ParamRef mean,
                                      ParamRef var, double epsilon,
                                      float *__restrict__ outMean,
                                      float *__restrict__ outMul,
                                      float *__restrict__ outBias) {
  for (int64_t p = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; p < params;
       p += int64_t(gridDim.x) * blockDim.x) {
    BatchNormAffine a =
        inferenceAffine(loadParam(scale, p), loadParam(bias, p),
                        loadParam(mean, p), loadParam(var, p), epsilon);
    outMean[p] = a.mean;
    outMul[p] = a.mul;
    outBias[p] = a.bias;
  }
}

/// Outputs 1-4 of training mode: running mean, running variance, batch
/// mean, inverse deviation (null data where absent).
struct TrainingOutputs {
  ParamRef t[4];
};

/// One block: each channel's parameters and statistics from the sums, into
/// `alpha`/`beta` and `staged` [4, channels], then, once every thread has
/// read its inputs, the outputs.
__global__ void
trainingChannelsKernel(ChannelSplit g, const double *__restrict__ sums,
                       const double *__restrict__ squares, ParamRef scale,
                       ParamRef bias, ParamRef runningMean, ParamRef runningVar,
                       double epsilon, double momentum,
                       float *__restrict__ alpha, float *__restrict__ beta,
                       double *__restrict__ staged, TrainingOutputs outs) {
  int64_t channels = g.channels;
  for (int64_t c = threadIdx.x; c < channels; c += blockDim.x) {
    float mean = batchMean(channelTotal(sums, g, c), g.count);
    float varSum = static_cast<float>(channelTotal(squares, g, c));
    BatchNormChannel ch = trainingChannel(
        mean, varSum, g.count, loadParam(scale, c), loadParam(bias, c),
        loadParam(runningMean, c), loadParam(runningVar, c), epsilon, momentum);
    alpha[c] = ch.alpha;
    beta[c] = ch.beta;
    staged[c] = ch.runningMean;
    staged[channels + c] = ch.runningVar;
    staged[2 * channels + c] = ch.batchMean;
    staged[3 * channels + c] = ch.invStd;
  }
  __syncthreads();
  for (int k = 0; k < 4; ++k)
    if (outs.t[k].data)
      for (int64_t c = threadIdx.x; c < channels; c += blockDim.x)
        storeParam(outs.t[k], c, staged[k * channels + c]);
}

/// y = (x - mean) * mul + bias (Centre: inference) or x * mul + bias
/// (training), with plane q's parameter q % params.
template <typename T, bool Centre>
__global__ void
affineKernel(const T *x, T *y, PlaneTiles t, const float *__restrict__ mean,
             const float *__restrict__ mul, const float *__restrict__ bias) {
  forPlaneElements(
      t, blockIdx.x, gridDim.x, threadIdx.x, blockDim.x,
      [&](int64_t e, int64_t p) {
        float v = loadF(x[e]);
        if constexpr (Centre)
          y[e] = storeF<T>(inferenceValue(v, {mean[p], mul[p], bias[p]}));
        else
          y[e] = storeF<T>(trainingValue(v, mul[p], bias[p]));
      });
}

//===----------------------------------------------------------------------===//
// BatchNormalizationGrad kernels
//===----------------------------------------------------------------------===//

/// Where the gradient's statistics come from: the forward's outputs, or
/// the sums of x (mean and invstd recomputed in double).
struct GradStats {
  ParamRef mean, invStd; ///< given (data null when recomputed)
  const double *sums = nullptr, *squares = nullptr;
  double epsilon = 0;

  __device__ void of(const ChannelSplit &g, int64_t c, double &m,
                     double &inv) const {
    if (mean.data) {
      m = loadParam(mean, c);
      inv = loadParam(invStd, c);
      return;
    }
    m = channelTotal(sums, g, c) / static_cast<double>(g.count);
    inv = recomputedInvStd(channelTotal(squares, g, c), g.count, epsilon);
  }
};

/// partialDy[c, s] = sum(dy), partialDyXhat[c, s] = sum(dy * xhat) over
/// block (c, s)'s values.
template <typename T>
__global__ void gradSumsKernel(const T *__restrict__ dy,
                               const T *__restrict__ x, ChannelSplit g,
                               GradStats stats, double *__restrict__ partialDy,
                               double *__restrict__ partialDyXhat) {
  __shared__ double shared[32];
  __shared__ double statsOf[2];
  int64_t c = blockIdx.x, s = blockIdx.y;
  if (threadIdx.x == 0)
    stats.of(g, c, statsOf[0], statsOf[1]);
  __syncthreads();
  double m = statsOf[0], inv = statsOf[1], sdy = 0, sdyx = 0;
  forChannelValues(g, c, s, threadIdx.x, blockDim.x, [&](int64_t o) {
    double d = static_cast<double>(loadF(dy[o]));
    sdy += d;
    sdyx += dyXhat(d, static_cast<double>(loadF(x[o])), m, inv);
  });
  sdy = blockSumToThread0(sdy, shared);
  sdyx = blockSumToThread0(sdyx, shared);
  if (threadIdx.x == 0) {
    partialDy[c * g.splits + s] = sdy;
    partialDyXhat[c * g.splits + s] = sdyx;
  }
}

/// One block: each channel's dx coefficients into `coeffs` and its sums
/// into `staged` [2, channels], then, once every thread has read its
/// inputs, dscale and dbias.
__global__ void gradChannelsKernel(ChannelSplit g, GradStats stats,
                                   ParamRef scale,
                                   const double *__restrict__ partialDy,
                                   const double *__restrict__ partialDyXhat,
                                   BatchNormGradChannel *__restrict__ coeffs,
                                   double *__restrict__ staged, ParamRef dscale,
                                   ParamRef dbias) {
  int64_t channels = g.channels;
  for (int64_t c = threadIdx.x; c < channels; c += blockDim.x) {
    double m, inv;
    stats.of(g, c, m, inv);
    double sdy = channelTotal(partialDy, g, c);
    double sdyx = channelTotal(partialDyXhat, g, c);
    coeffs[c] = gradChannel(loadParam(scale, c), m, inv, sdy, sdyx, g.count);
    staged[c] = sdyx;
    staged[channels + c] = sdy;
  }
  __syncthreads();
  for (int64_t c = threadIdx.x; c < channels; c += blockDim.x) {
    storeParam(dscale, c, staged[c]);
    storeParam(dbias, c, staged[channels + c]);
  }
}

template <typename T>
__global__ void gradInputKernel(const T *dy, const T *x, T *dx, PlaneTiles t,
                                const BatchNormGradChannel *__restrict__ k) {
  forPlaneElements(t, blockIdx.x, gridDim.x, threadIdx.x, blockDim.x,
                   [&](int64_t e, int64_t c) {
                     dx[e] =
                         storeF<T>(gradValue(loadF(x[e]), loadF(dy[e]), k[c]));
                   });
}

//===----------------------------------------------------------------------===//
// Host helpers
//===----------------------------------------------------------------------===//

/// The ParamRef of a float tensor (f32, f16, bf16, f64); isFloatDType has
/// been checked.
ParamRef paramOf(const DeviceTensor *t) {
  if (!t)
    return {};
  ParamKind kind = t->dtype == DType::F16    ? ParamKind::F16
                   : t->dtype == DType::BF16 ? ParamKind::BF16
                   : t->dtype == DType::F64  ? ParamKind::F64
                                             : ParamKind::F32;
  return {t->data, kind};
}

unsigned elementBlocks(const PlaneTiles &t) {
  return t.tiled()
             ? static_cast<unsigned>(std::clamp<int64_t>(t.units, 1, 132 * 16))
             : gridFor(t.units, kThreads);
}

dim3 reductionGrid(const ChannelSplit &g) {
  return dim3(static_cast<unsigned>(g.channels),
              static_cast<unsigned>(g.splits));
}

/// `count` doubles of scratch into `out`.
template <typename T>
Error take(const CudaKernelCall &call, int64_t count, T *&out) {
  auto p = call.scratch<T>(static_cast<uint64_t>(count));
  if (!p)
    return p.takeError();
  out = *p;
  return Error::success();
}

/// The sums of x per channel chunk, and with `squares` its squared
/// deviations, the forward's (FloatMean) or the gradient's.
template <typename T, bool FloatMean>
Error launchStatistics(const T *x, const ChannelSplit &g, double *sums,
                       double *squares, cudaStream_t stream) {
  channelSumKernel<T><<<reductionGrid(g), kThreads, 0, stream>>>(x, g, sums);
  if (Error e = checkLaunch("channelSumKernel"))
    return e;
  channelSquaresKernel<T, FloatMean>
      <<<reductionGrid(g), kThreads, 0, stream>>>(x, g, sums, squares);
  return checkLaunch("channelSquaresKernel");
}

} // namespace

//===----------------------------------------------------------------------===//
// BatchNormalization
//===----------------------------------------------------------------------===//

/// Inputs (X, scale, B, mean, var), outputs (Y, [running mean, running var,
/// batch mean, inverse deviation]) in training mode, attributes epsilon,
/// momentum, training_mode and (before opset 9) spatial, as the cpu kernel.
Error runBatchNormalization(const CudaKernelCall &call) {
  bool training = call.attrs.getInt("training_mode", 0) != 0;
  if (!training)
    for (size_t i = 1; i < call.outputs.size(); ++i)
      if (call.outputs[i])
        return cudaKernelError("BatchNormalization: outputs beyond Y need "
                               "training_mode=1");
  const DeviceTensor *x = call.input(0);
  DeviceTensor *y = call.output(0);
  const DeviceTensor *scale = call.input(1), *bias = call.input(2),
                     *mean = call.input(3), *var = call.input(4);
  if (!x || !y || !scale || !bias || !mean || !var)
    return cudaKernelError("BatchNormalization: needs inputs X, scale, B, "
                           "mean, var and output Y");
  if (!isFloatDType(x->dtype) || y->dtype != x->dtype)
    return cudaKernelError("BatchNormalization: unsupported element types " +
                           dtypeName(x->dtype) + " -> " + dtypeName(y->dtype));
  for (const DeviceTensor *t : {scale, bias, mean, var})
    if (!isFloatDType(t->dtype))
      return cudaKernelError("BatchNormalization: parameter of type " +
                             dtypeName(t->dtype) + " is not a float type");
  if (x->shape.size() < 2 || y->shape != x->shape)
    return cudaKernelError("BatchNormalization: input shape " +
                           formatShape(x->shape) + " and output shape " +
                           formatShape(y->shape) +
                           " must be equal, [N, C, ...]");
  int64_t batch = x->shape[0], channels = x->shape[1];
  int64_t spatialSize =
      numElements(llvm::ArrayRef<int64_t>(x->shape).drop_front(2));
  // Before opset 9, spatial=0 gives every activation its own statistics.
  bool perActivation = !training && call.opsetVersion < 9 &&
                       call.attrs.getInt("spatial", 1) == 0;
  int64_t params = perActivation ? channels * spatialSize : channels;
  int64_t inner = perActivation ? 1 : spatialSize;
  for (const DeviceTensor *t : {scale, bias, mean, var})
    if (t->numElements() != params)
      return cudaKernelError("BatchNormalization: parameter shape " +
                             formatShape(t->shape) + " does not match input " +
                             formatShape(x->shape) + " (expected " +
                             Twine(params) + " elements)");
  for (size_t i = 1; i < call.outputs.size() && i < 5; ++i)
    if (DeviceTensor *t = call.outputs[i])
      if (!isFloatDType(t->dtype) || t->numElements() != params)
        return cudaKernelError("BatchNormalization: output " + Twine(i) +
                               " is " + dtypeName(t->dtype) +
                               formatShape(t->shape) + ", expected " +
                               Twine(params) + " float elements");
  double epsilon = call.attrs.getFloat("epsilon", 1e-5);
  int64_t count = batch * inner;
  if (training && count < 2)
    return cudaKernelError("BatchNormalization: training mode needs more "
                           "than one value per channel, got input shape " +
                           formatShape(x->shape));
  double momentum = call.attrs.getFloat("momentum", 0.9);

  return dispatchFloat(x->dtype, call.opType, [&](auto tag) -> Error {
    using T = decltype(tag);
    const T *px = static_cast<const T *>(x->data);
    T *py = static_cast<T *>(y->data);
    PlaneTiles tiles = planPlaneTiles(batch * params, params, inner, kTile);
    if (!training) {
      if (params == 0 || x->numElements() == 0)
        return Error::success();
      float *m, *mul, *b;
      if (Error e = take(call, params, m))
        return e;
      if (Error e = take(call, params, mul))
        return e;
      if (Error e = take(call, params, b))
        return e;
      inferenceParamsKernel<<<gridFor(params, kThreads), kThreads, 0,
                              call.stream>>>(params, paramOf(scale),
                                             paramOf(bias), paramOf(mean),
                                             paramOf(var), epsilon, m, mul, b);
      if (Error e = checkLaunch("inferenceParamsKernel"))
        return e;
      affineKernel<T, true><<<elementBlocks(tiles), kThreads, 0, call.stream>>>(
          px, py, tiles, m, mul, b);
      return checkLaunch("affineKernel");
    }

    if (channels == 0)
      return Error::success();
    ChannelSplit g = planChannelSplit(batch, channels, inner);
    double *sums, *squares, *staged;
    float *alpha, *beta;
    if (Error e = take(call, channels * g.splits, sums))
      return e;
    if (Error e = take(call, channels * g.splits, squares))
      return e;
    if (Error e = take(call, 4 * channels, staged))
      return e;
    if (Error e = take(call, channels, alpha))
      return e;
    if (Error e = take(call, channels, beta))
      return e;
    if (Error e = launchStatistics<T, true>(px, g, sums, squares, call.stream))
      return e;
    TrainingOutputs outs;
    for (int k = 0; k < 4; ++k)
      outs.t[k] = paramOf(call.output(1 + k));
    trainingChannelsKernel<<<1, kThreads, 0, call.stream>>>(
        g, sums, squares, paramOf(scale), paramOf(bias), paramOf(mean),
        paramOf(var), epsilon, momentum, alpha, beta, staged, outs);
    if (Error e = checkLaunch("trainingChannelsKernel"))
      return e;
    affineKernel<T, false><<<elementBlocks(tiles), kThreads, 0, call.stream>>>(
        px, py, tiles, nullptr, alpha, beta);
    return checkLaunch("affineKernel");
  });
}

//===----------------------------------------------------------------------===//
// BatchNormalizationGrad
//===----------------------------------------------------------------------===//

/// Inputs (dy, x, scale, [mean, invstd]), outputs ([dx], [dscale],
/// [dbias]), attribute epsilon, as the cpu kernel.
Error runBatchNormalizationGrad(const CudaKernelCall &call) {
  const DeviceTensor *dy = call.input(0), *x = call.input(1),
                     *scale = call.input(2), *meanIn = call.input(3),
                     *invStdIn = call.input(4);
  DeviceTensor *dx = call.output(0), *dscale = call.output(1),
               *dbias = call.output(2);
  if (!dy || !x || !scale)
    return cudaKernelError(
        "BatchNormalizationGrad: needs inputs dy, x and scale");
  if (!isFloatDType(x->dtype) || dy->dtype != x->dtype ||
      dy->shape != x->shape || x->shape.size() < 2)
    return cudaKernelError("BatchNormalizationGrad: dy " +
                           dtypeName(dy->dtype) + formatShape(dy->shape) +
                           " and x " + dtypeName(x->dtype) +
                           formatShape(x->shape) +
                           " must be the same float type and shape "
                           "[N, C, ...]");
  if (dx && (dx->dtype != x->dtype || dx->shape != x->shape))
    return cudaKernelError("BatchNormalizationGrad: dx must be like x");
  if (static_cast<bool>(meanIn) != static_cast<bool>(invStdIn))
    return cudaKernelError("BatchNormalizationGrad: mean and invstd must be "
                           "given together");
  int64_t batch = x->shape[0], channels = x->shape[1];
  int64_t inner = numElements(llvm::ArrayRef<int64_t>(x->shape).drop_front(2));
  for (const DeviceTensor *t :
       {scale, meanIn, invStdIn, static_cast<const DeviceTensor *>(dscale),
        static_cast<const DeviceTensor *>(dbias)})
    if (t && (!isFloatDType(t->dtype) || t->numElements() != channels))
      return cudaKernelError("BatchNormalizationGrad: per-channel tensor " +
                             dtypeName(t->dtype) + formatShape(t->shape) +
                             " does not have " + Twine(channels) +
                             " float elements");
  if (batch * inner == 0)
    return cudaKernelError("BatchNormalizationGrad: no values per channel in " +
                           formatShape(x->shape));
  double epsilon = call.attrs.getFloat("epsilon", 1e-5);

  return dispatchFloat(x->dtype, call.opType, [&](auto tag) -> Error {
    using T = decltype(tag);
    if (channels == 0)
      return Error::success();
    const T *px = static_cast<const T *>(x->data);
    const T *pdy = static_cast<const T *>(dy->data);
    ChannelSplit g = planChannelSplit(batch, channels, inner);
    GradStats stats;
    stats.epsilon = epsilon;
    if (meanIn) {
      stats.mean = paramOf(meanIn);
      stats.invStd = paramOf(invStdIn);
    } else {
      double *sums, *squares;
      if (Error e = take(call, channels * g.splits, sums))
        return e;
      if (Error e = take(call, channels * g.splits, squares))
        return e;
      if (Error e =
              launchStatistics<T, false>(px, g, sums, squares, call.stream))
        return e;
      stats.sums = sums;
      stats.squares = squares;
    }
    double *partialDy, *partialDyXhat, *staged;
    BatchNormGradChannel *coeffs;
    if (Error e = take(call, channels * g.splits, partialDy))
      return e;
    if (Error e = take(call, channels * g.splits, partialDyXhat))
      return e;
    if (Error e = take(call, 2 * channels, staged))
      return e;
    if (Error e = take(call, channels, coeffs))
      return e;
    gradSumsKernel<T><<<reductionGrid(g), kThreads, 0, call.stream>>>(
        pdy, px, g, stats, partialDy, partialDyXhat);
    if (Error e = checkLaunch("gradSumsKernel"))
      return e;
    gradChannelsKernel<<<1, kThreads, 0, call.stream>>>(
        g, stats, paramOf(scale), partialDy, partialDyXhat, coeffs, staged,
        paramOf(dscale), paramOf(dbias));
    if (Error e = checkLaunch("gradChannelsKernel"))
      return e;
    if (!dx)
      return Error::success();
    PlaneTiles tiles = planPlaneTiles(batch * channels, channels, inner, kTile);
    gradInputKernel<T><<<elementBlocks(tiles), kThreads, 0, call.stream>>>(
        pdy, px, static_cast<T *>(dx->data), tiles, coeffs);
    return checkLaunch("gradInputKernel");
  });
}

} // namespace zinc::cuda
