//===- Rotary.cu - zinc.Rotary, zinc.RotaryGrad, zinc.SwiGlu and its grad -===//
//
// The two fusions of Llama's layers that are elementwise once indexed:
// rotary embeddings (fuse-rotary; RotaryMath.h's indexing and math, one
// thread an element, the tables broadcast to x) and the gated unit
// silu(gate) up (fuse-swiglu; ElementwiseMath.h's silu and siluGrad, the
// cpu kernels' formulas). Computed in float for every storage type.
//
//===----------------------------------------------------------------------===//
#include "CudaKernels.h"
#include "DeviceTypes.cuh"
#include "ElementwiseMath.h"
#include "RotaryMath.h"
#include "zinc/runtime/cuda/CudaCheck.h"
#include "llvm/ADT/Twine.h"
#include <cstdint>

namespace zinc::cuda {
namespace {

using llvm::Error;
namespace ew = elementwise;

constexpr unsigned kThreads = 256;

/// Rotary (backward = false) or RotaryGrad: a is x or dy.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    rotaryKernel(const T *__restrict__ a, const T *__restrict__ cos,
                 const T *__restrict__ sin, T *__restrict__ out, int64_t n,
                 rotary::Geometry g, bool backward) {
  int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += step) {
    int64_t row = e / g.d, col = e - row * g.d;
    int64_t other = rotary::partner(col, g.d);
    bool first = col < g.d / 2;
    float v = loadF(a[e]), p = loadF(a[row * g.d + other]);
    float c = loadF(cos[rotary::tableOffset(g, row, col)]);
    if (backward) {
      float s = loadF(sin[rotary::tableOffset(g, row, other)]);
      out[e] = storeF<T>(rotary::backward(v, p, c, s, first));
    } else {
      float s = loadF(sin[rotary::tableOffset(g, row, col)]);
      out[e] = storeF<T>(rotary::forward(v, p, c, s, first));
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    swiGluKernel(const T *__restrict__ gate, const T *__restrict__ up,
                 T *__restrict__ y, int64_t n) {
  int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += step)
    y[e] = storeF<T>(ew::silu(loadF(gate[e])) * loadF(up[e]));
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    swiGluGradKernel(const T *__restrict__ gate, const T *__restrict__ up,
                     const T *__restrict__ dy, T *__restrict__ dgate,
                     T *__restrict__ dup, int64_t n) {
  int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += step) {
    float g = loadF(gate[e]), d = loadF(dy[e]);
    dup[e] = storeF<T>(d * ew::silu(g));
    dgate[e] = storeF<T>(ew::siluGrad(g, d * loadF(up[e])));
  }
}

/// Rotary(x, cos, sin) -> y or RotaryGrad(dy, cos, sin) -> dx.
Error runRotaryKind(const CudaKernelCall &call, bool backward) {
  const DeviceTensor *a = call.input(0), *cos = call.input(1),
                     *sin = call.input(2);
  DeviceTensor *out = call.output(0);
  if (!a || !cos || !sin || !out)
    return cudaKernelError(call.opType + ": missing an operand");
  if (out->dtype != a->dtype || out->shape != a->shape)
    return cudaKernelError(call.opType +
                           ": output differs from input 0 in type or shape");
  if (cos->dtype != a->dtype || sin->dtype != a->dtype ||
      cos->shape != sin->shape)
    return cudaKernelError(call.opType + ": cos and sin differ from each other "
                                         "or from input 0 in type or shape");
  rotary::Geometry g;
  if (!rotary::makeGeometry(a->shape.data(), int(a->shape.size()),
                            cos->shape.data(), int(cos->shape.size()), g))
    return cudaKernelError(call.opType + ": tables of shape " +
                           formatShape(cos->shape) + " do not fit " +
                           formatShape(a->shape) +
                           " (broadcast to it, even last axis, rank <= " +
                           llvm::Twine(rotary::kMaxRank) + ")");
  int64_t n = a->numElements();
  return dispatchFloat(a->dtype, call.opType, [&](auto tag) -> Error {
    using T = decltype(tag);
    if (n == 0)
      return Error::success();
    rotaryKernel<T><<<gridFor(n, kThreads), kThreads, 0, call.stream>>>(
        static_cast<const T *>(a->data), static_cast<const T *>(cos->data),
        static_cast<const T *>(sin->data), static_cast<T *>(out->data), n, g,
        backward);
    return checkLaunch("rotaryKernel");
  });
}

/// Every operand present, of input 0's type and shape.
Error checkSwiGlu(const CudaKernelCall &call, size_t inputs, size_t outputs) {
  const DeviceTensor *gate = call.input(0);
  if (!gate)
    return cudaKernelError(call.opType + ": missing input 0");
  auto same = [&](const DeviceTensor *t) {
    return t && t->dtype == gate->dtype && t->shape == gate->shape;
  };
  for (size_t i = 1; i < inputs; ++i)
    if (!same(call.input(i)))
      return cudaKernelError(
          call.opType + ": input " + llvm::Twine(i) +
          " is missing or differs from input 0 in type or shape");
  for (size_t i = 0; i < outputs; ++i)
    if (!same(call.output(i)))
      return cudaKernelError(
          call.opType + ": output " + llvm::Twine(i) +
          " is missing or differs from input 0 in type or shape");
  return Error::success();
}

} // namespace

Error runRotary(const CudaKernelCall &call) {
  return runRotaryKind(call, false);
}
Error runRotaryGrad(const CudaKernelCall &call) {
  return runRotaryKind(call, true);
}

Error runSwiGlu(const CudaKernelCall &call) {
  if (Error e = checkSwiGlu(call, 2, 1))
    return e;
  const DeviceTensor &gate = *call.input(0), &up = *call.input(1);
  DeviceTensor &y = *call.output(0);
  int64_t n = gate.numElements();
  return dispatchFloat(gate.dtype, call.opType, [&](auto tag) -> Error {
    using T = decltype(tag);
    if (n == 0)
      return Error::success();
    swiGluKernel<T><<<gridFor(n, kThreads), kThreads, 0, call.stream>>>(
        static_cast<const T *>(gate.data), static_cast<const T *>(up.data),
        static_cast<T *>(y.data), n);
    return checkLaunch("swiGluKernel");
  });
}

Error runSwiGluGrad(const CudaKernelCall &call) {
  if (Error e = checkSwiGlu(call, 3, 2))
    return e;
  const DeviceTensor &gate = *call.input(0), &up = *call.input(1),
                     &dy = *call.input(2);
  DeviceTensor &dgate = *call.output(0), &dup = *call.output(1);
  int64_t n = gate.numElements();
  return dispatchFloat(gate.dtype, call.opType, [&](auto tag) -> Error {
    using T = decltype(tag);
    if (n == 0)
      return Error::success();
    swiGluGradKernel<T><<<gridFor(n, kThreads), kThreads, 0, call.stream>>>(
        static_cast<const T *>(gate.data), static_cast<const T *>(up.data),
        static_cast<const T *>(dy.data), static_cast<T *>(dgate.data),
        static_cast<T *>(dup.data), n);
    return checkLaunch("swiGluGradKernel");
  });
}

} // namespace zinc::cuda
