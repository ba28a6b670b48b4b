//===- BatchNorm.cpp - BatchNormalization cpu kernel (inference mode) -----===//
//
// Only inference: Y = (X - mean) / sqrt(var + epsilon) * scale + B with the
// running statistics given as inputs. Training mode (batch statistics and
// running-stat outputs) is refused so that it never returns wrong numbers.
//
//===----------------------------------------------------------------------===//
#include "KernelUtil.h"
#include "Kernels.h"
#include "llvm/ADT/Twine.h"
#include <cmath>
#include <vector>

namespace zinc::cpu {

/// Below this many elements the kernel runs on one thread.
static constexpr int64_t kParallelWork = 1 << 16;

/// Reads a parameter tensor of any float type into doubles; opset 15 lets
/// scale/B and mean/var have other types than X.
static std::vector<double> loadParam(const TensorRef &t) {
  std::vector<double> v(t.numElements());
  visitDType(t.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *p = t.as<const T>();
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = static_cast<double>(load(p[i]));
  });
  return v;
}

template <typename T>
static void batchNorm(const T *x, T *y, int64_t batch, int64_t params,
                      int64_t inner, const std::vector<double> &mean,
                      const std::vector<double> &mul,
                      const std::vector<double> &add) {
  using C = ComputeT<T>;
  // Parameter p covers `inner` contiguous elements of each batch item:
  // one channel's spatial plane, or a single activation when spatial=0.
  int64_t planes = batch * params;
#pragma omp parallel for schedule(static) if (planes * inner > kParallelWork)
  for (int64_t plane = 0; plane < planes; ++plane) {
    int64_t p = plane % params;
    C m = static_cast<C>(mean[p]), a = static_cast<C>(mul[p]),
      b = static_cast<C>(add[p]);
    const T *xp = x + plane * inner;
    T *yp = y + plane * inner;
    // Subtracting the mean first keeps precision when X is close to it.
    for (int64_t i = 0; i < inner; ++i)
      yp[i] = store<T>((load(xp[i]) - m) * a + b);
  }
}

llvm::Error runBatchNormalization(const KernelCall &call) {
  for (size_t i = 1; i < call.outputs.size(); ++i)
    if (call.outputs[i])
      return kernelError("unsupported: BatchNormalization in training mode");
  if (call.attrs.getInt("training_mode", 0) != 0)
    return kernelError("unsupported: BatchNormalization in training mode");
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
  bool perActivation =
      call.opsetVersion < 9 && call.attrs.getInt("spatial", 1) == 0;
  int64_t params = perActivation ? channels * spatialSize : channels;
  int64_t inner = perActivation ? 1 : spatialSize;
  for (const TensorRef *t : {scale, bias, mean, var})
    if (t->numElements() != params)
      return kernelError("BatchNormalization: parameter shape " +
                         formatShape(t->shape) + " does not match input " +
                         formatShape(x->shape) + " (expected " +
                         llvm::Twine(params) + " elements)");

  double epsilon = call.attrs.getFloat("epsilon", 1e-5);
  std::vector<double> s = loadParam(*scale), b = loadParam(*bias),
                      m = loadParam(*mean), v = loadParam(*var);
  std::vector<double> mul(params);
  for (int64_t p = 0; p < params; ++p)
    mul[p] = s[p] / std::sqrt(v[p] + epsilon);

  visitDType(x->dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (isFloatStorage<T>())
      batchNorm<T>(x->as<const T>(), y->as<T>(), batch, params, inner, m, mul,
                   b);
  });
  return llvm::Error::success();
}

} // namespace zinc::cpu
