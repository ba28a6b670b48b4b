//===- BatchNorm.cpp - BatchNormalization cpu kernel ----------------------===//
//
// Inference: Y = (X - mean) / sqrt(var + epsilon) * scale + B with the
// running statistics given as inputs.
// Training (training_mode=1): the same with the batch mean and the biased
// (population) batch variance over N and the spatial axes, per channel.
// Outputs 1 and 2 are the updated running statistics,
//   running = momentum * running + (1 - momentum) * batch_statistic,
// where the variance statistic is the UNBIASED batch variance (n / (n - 1),
// n = N * spatial size) as PyTorch updates it, not ONNX's reference (the
// population variance): a model exported from PyTorch was trained with
// PyTorch's update, and continuing its training must keep that. zinc's
// outputs 3 and 4 (beyond ONNX's three) are the batch mean and inverse
// standard deviation, which zinc.BatchNormalizationGrad reuses.
//
// Inference needs no scratch (each plane reads its channel's parameters);
// training keeps seven per-channel arrays in the call's workspace.
//
//===----------------------------------------------------------------------===//
#include "KernelUtil.h"
#include "Kernels.h"
#include "llvm/ADT/Twine.h"
#include <cmath>

namespace zinc::cpu {

/// Below this many elements the kernel runs on one thread.
static constexpr int64_t kParallelWork = 1 << 16;

/// Element p of a parameter tensor of any float type, as double; opset 15
/// lets scale/B and mean/var have other types than X.
static double loadParam(const TensorRef &t, int64_t p) {
  return visitDType(t.dtype, [&](auto tag) {
    using T = decltype(tag);
    return static_cast<double>(load(t.as<const T>()[p]));
  });
}

/// Inference: Y = (X - mean) * scale / sqrt(var + epsilon) + B, each plane
/// with its parameter's values.
template <typename T>
static void batchNorm(const T *x, T *y, int64_t batch, int64_t params,
                      int64_t inner, const TensorRef &scale,
                      const TensorRef &bias, const TensorRef &mean,
                      const TensorRef &var, double epsilon) {
  using C = ComputeT<T>;
  // Parameter p covers `inner` contiguous elements of each batch item:
  // one channel's spatial plane, or a single activation when spatial=0.
  int64_t planes = batch * params;
  parallelFor(planes, planes * inner > kParallelWork, [&](int64_t plane) {
    int64_t p = plane % params;
    double mul = loadParam(scale, p) / std::sqrt(loadParam(var, p) + epsilon);
    C m = static_cast<C>(loadParam(mean, p)), a = static_cast<C>(mul),
      b = static_cast<C>(loadParam(bias, p));
    const T *xp = x + plane * inner;
    T *yp = y + plane * inner;
    // Subtracting the mean first keeps precision when X is close to it.
    for (int64_t i = 0; i < inner; ++i)
      yp[i] = store<T>((load(xp[i]) - m) * a + b);
  });
}

/// The batch statistics of one channel, computed as PyTorch's cpu kernel
/// does (sums in double, the mean and the sum of squares rounded to the
/// compute type in between), so that the normalised values agree with
/// PyTorch's to the last bit where the input does: a ReLU after the
/// BatchNorm turns a one-ulp difference at zero into a different mask.
struct ChannelStats {
  double mean = 0;   ///< rounded to the compute type
  double varSum = 0; ///< sum of squared deviations, rounded likewise
};

/// Per channel of x [N, C, S...], into stats[0, channels).
template <typename T>
static void batchStatistics(const T *x, int64_t batch, int64_t channels,
                            int64_t inner, ChannelStats *stats) {
  using C = ComputeT<T>;
  double count = static_cast<double>(batch * inner);
  bool big = batch * channels * inner > kParallelWork;
  parallelFor(channels, big, [&](int64_t c) {
    double sum = 0;
    for (int64_t n = 0; n < batch; ++n) {
      const T *xp = x + (n * channels + c) * inner;
      for (int64_t i = 0; i < inner; ++i)
        sum += static_cast<double>(load(xp[i]));
    }
    C m = static_cast<C>(sum / count);
    double sq = 0;
    for (int64_t n = 0; n < batch; ++n) {
      const T *xp = x + (n * channels + c) * inner;
      for (int64_t i = 0; i < inner; ++i) {
        C d = load(xp[i]) - m;
        sq += static_cast<double>(d * d);
      }
    }
    stats[c].mean = static_cast<double>(m);
    stats[c].varSum = static_cast<double>(static_cast<C>(sq));
  });
}

/// y = x * alpha + beta per channel (PyTorch's form of training mode).
template <typename T>
static void affinePerChannel(const T *x, T *y, int64_t batch, int64_t channels,
                             int64_t inner, const double *alpha,
                             const double *beta) {
  using C = ComputeT<T>;
  int64_t planes = batch * channels;
  parallelFor(planes, planes * inner > kParallelWork, [&](int64_t plane) {
    int64_t c = plane % channels;
    C a = static_cast<C>(alpha[c]), b = static_cast<C>(beta[c]);
    const T *xp = x + plane * inner;
    T *yp = y + plane * inner;
    for (int64_t i = 0; i < inner; ++i)
      yp[i] = store<T>(load(xp[i]) * a + b);
  });
}

/// Writes `n` values into a float tensor of any float type.
static void storeParam(TensorRef &t, const double *values, int64_t n) {
  visitDType(t.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (isFloatStorage<T>()) {
      T *p = t.as<T>();
      for (int64_t i = 0; i < n; ++i)
        p[i] = store<T>(static_cast<ComputeT<T>>(values[i]));
    }
  });
}

llvm::Error runBatchNormalization(const KernelCall &call) {
  bool training = call.attrs.getInt("training_mode", 0) != 0;
  if (!training)
    for (size_t i = 1; i < call.outputs.size(); ++i)
      if (call.outputs[i])
        return kernelError("BatchNormalization: outputs beyond Y need "
                           "training_mode=1");
  const TensorRef *x = call.input(0);
  TensorRef *y = call.output(0);
  const TensorRef *scale = call.input(1), *bias = call.input(2),
                  *mean = call.input(3), *var = call.input(4);
  if (!x || !y || !scale || !bias || !mean || !var)
    return kernelError("BatchNormalization: needs inputs X, scale, B, mean, "
                       "var and output Y");
  if (!isFloatDType(x->dtype) || y->dtype != x->dtype)
    return kernelError("BatchNormalization: unsupported element types " +
                       dtypeName(x->dtype) + " -> " + dtypeName(y->dtype));
  for (const TensorRef *t : {scale, bias, mean, var})
    if (!isFloatDType(t->dtype))
      return kernelError("BatchNormalization: parameter of type " +
                         dtypeName(t->dtype) + " is not a float type");
  if (x->rank() < 2 || y->shape != x->shape)
    return kernelError("BatchNormalization: input shape " +
                       formatShape(x->shape) + " and output shape " +
                       formatShape(y->shape) + " must be equal, [N, C, ...]");
  int64_t batch = x->shape[0], channels = x->shape[1];
  int64_t spatialSize =
      numElements(llvm::ArrayRef<int64_t>(x->shape).drop_front(2));
  // Before opset 9, spatial=0 gives every activation its own statistics:
  // parameters of shape [C, D1, ...].
  bool perActivation = !training && call.opsetVersion < 9 &&
                       call.attrs.getInt("spatial", 1) == 0;
  int64_t params = perActivation ? channels * spatialSize : channels;
  int64_t inner = perActivation ? 1 : spatialSize;
  for (const TensorRef *t : {scale, bias, mean, var})
    if (t->numElements() != params)
      return kernelError("BatchNormalization: parameter shape " +
                         formatShape(t->shape) + " does not match input " +
                         formatShape(x->shape) + " (expected " +
                         llvm::Twine(params) + " elements)");

  for (size_t i = 1; i < call.outputs.size() && i < 5; ++i)
    if (TensorRef *t = call.outputs[i])
      if (!isFloatDType(t->dtype) || t->numElements() != params)
        return kernelError("BatchNormalization: output " + llvm::Twine(i) +
                           " is " + dtypeName(t->dtype) +
                           formatShape(t->shape) + ", expected " +
                           llvm::Twine(params) + " float elements");

  double epsilon = call.attrs.getFloat("epsilon", 1e-5);
  if (!training) {
    visitDType(x->dtype, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (isFloatStorage<T>())
        batchNorm<T>(x->as<const T>(), y->as<T>(), batch, params, inner, *scale,
                     *bias, *mean, *var, epsilon);
    });
    return llvm::Error::success();
  }

  int64_t count = batch * inner;
  if (count < 2)
    return kernelError("BatchNormalization: training mode needs more than "
                       "one value per channel, got input shape " +
                       formatShape(x->shape));
  double momentum = call.attrs.getFloat("momentum", 0.9);
  auto stats = call.scratch<ChannelStats>(params);
  if (!stats)
    return stats.takeError();
  // runningMean, runningVar, batchMean, invStd, alpha, beta.
  double *arrays[6];
  for (double *&a : arrays) {
    auto p = call.scratch<double>(params);
    if (!p)
      return p.takeError();
    a = *p;
  }
  double *runningMean = arrays[0], *runningVar = arrays[1],
         *batchMean = arrays[2], *invStd = arrays[3], *alpha = arrays[4],
         *beta = arrays[5];
  visitDType(x->dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (isFloatStorage<T>()) {
      using C = ComputeT<T>;
      batchStatistics<T>(x->as<const T>(), batch, channels, inner, *stats);
      for (int64_t p = 0; p < params; ++p) {
        const ChannelStats &st = (*stats)[p];
        double popVar = st.varSum / count;
        C inv = static_cast<C>(1 / std::sqrt(popVar + epsilon));
        C a = inv * static_cast<C>(loadParam(*scale, p));
        C mc = static_cast<C>(st.mean);
        batchMean[p] = st.mean;
        invStd[p] = static_cast<double>(inv);
        alpha[p] = static_cast<double>(a);
        beta[p] =
            static_cast<double>(static_cast<C>(loadParam(*bias, p)) - mc * a);
        runningMean[p] =
            momentum * loadParam(*mean, p) + (1 - momentum) * st.mean;
        // PyTorch's update: the unbiased variance, see the file comment.
        runningVar[p] = momentum * loadParam(*var, p) +
                        (1 - momentum) * (st.varSum / (count - 1));
      }
      affinePerChannel<T>(x->as<const T>(), y->as<T>(), batch, channels, inner,
                          alpha, beta);
    }
  });
  // Written after the running statistics were read: a plan may give an
  // output the memory of its input.
  for (int i = 1; i <= 4; ++i)
    if (TensorRef *t = call.output(i))
      storeParam(*t, arrays[i - 1], params);
  return llvm::Error::success();
}

} // namespace zinc::cpu
