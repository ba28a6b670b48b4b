//===- Pool.cu - MaxPool, AveragePool, GlobalAveragePool and their grads --===//
//
// The host resolves each call's windows with the cpu kernels' own helper
// (resolveWindowGeometry, after poolGeometry's checks, so attributes,
// auto_pad, ceil mode and the messages are the cpu's) and hands the kernel
// a PoolShape by value; PoolMath.h works out each window from it. One thread
// per output element forward; backward one thread per dX element, gathering
// from the output windows that cover it in the order the cpu scatters, so
// the gradients need no atomics, run the same every time and match the cpu
// bit for bit. MaxPoolGrad recomputes each covering window's maximum from
// X, as the cpu does, with its tie rule. GlobalAveragePool sums each plane
// in double, one warp per plane, in a fixed order.
//
//===----------------------------------------------------------------------===//
#include "CudaKernels.h"
#include "DeviceTypes.cuh"
#include "PoolMath.h"
#include "zinc/runtime/cuda/CudaCheck.h"
#include "llvm/ADT/Twine.h"
#include <cstdint>

namespace zinc::cuda {
namespace {

using llvm::Error;
using llvm::Expected;
using llvm::Twine;

constexpr unsigned kThreads = 256;

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

/// Reads one plane of a tensor as float, by offset within the plane.
template <typename T> struct PlaneLoad {
  const T *plane;
  __device__ __forceinline__ float operator()(int64_t i) const {
    return loadF(plane[i]);
  }
};

template <typename T>
__global__ void __launch_bounds__(kThreads)
    maxPoolKernel(PoolShape p, const T *__restrict__ x, T *__restrict__ y,
                  int64_t *__restrict__ indices, bool columnMajor) {
  int64_t n = p.planes * p.outPlane;
  int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += step) {
    int64_t plane = e / p.outPlane, o = e - plane * p.outPlane;
    PoolArgmax m = poolMaxAt(p, o, PlaneLoad<T>{x + plane * p.inPlane});
    y[e] = storeF<T>(m.value);
    if (indices)
      indices[e] = poolIndexOf(p, m.pos, plane, columnMajor);
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    averagePoolKernel(PoolShape p, const T *__restrict__ x, T *__restrict__ y,
                      bool countIncludePad) {
  int64_t n = p.planes * p.outPlane;
  int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += step) {
    int64_t plane = e / p.outPlane, o = e - plane * p.outPlane;
    y[e] = storeF<T>(poolAverageAt(p, o, countIncludePad,
                                   PlaneLoad<T>{x + plane * p.inPlane}));
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    maxPoolGradKernel(PoolShape p, const T *__restrict__ dy,
                      const T *__restrict__ x, T *__restrict__ dx) {
  int64_t n = p.planes * p.inPlane;
  int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += step) {
    int64_t plane = e / p.inPlane, i = e - plane * p.inPlane;
    dx[e] = storeF<T>(poolMaxGradAt(p, i, PlaneLoad<T>{dy + plane * p.outPlane},
                                    PlaneLoad<T>{x + plane * p.inPlane}));
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    averagePoolGradKernel(PoolShape p, const T *__restrict__ dy,
                          T *__restrict__ dx, bool countIncludePad) {
  int64_t n = p.planes * p.inPlane;
  int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += step) {
    int64_t plane = e / p.inPlane, i = e - plane * p.inPlane;
    dx[e] = storeF<T>(poolAverageGradAt(p, i, countIncludePad,
                                        PlaneLoad<T>{dy + plane * p.outPlane}));
  }
}

/// One warp per plane: lanes sum strided elements in double, then a fixed
/// butterfly adds the lanes, so the result does not vary run to run.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    globalAveragePoolKernel(const T *__restrict__ x, T *__restrict__ y,
                            int64_t planes, int64_t spatial) {
  int lane = threadIdx.x % 32;
  int64_t warps = int64_t(gridDim.x) * blockDim.x / 32;
  for (int64_t plane = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
       plane < planes; plane += warps) {
    const T *xp = x + plane * spatial;
    double sum = 0;
    for (int64_t i = lane; i < spatial; i += 32)
      sum += static_cast<double>(loadF(xp[i]));
#pragma unroll
    for (int m = 16; m > 0; m /= 2)
      sum += __shfl_xor_sync(0xffffffffu, sum, m);
    if (lane == 0)
      y[plane] =
          storeF<T>(static_cast<float>(sum / static_cast<double>(spatial)));
  }
}

//===----------------------------------------------------------------------===//
// Host checks
//===----------------------------------------------------------------------===//

/// The pool of `call` from input `x` [N, C, spatial...] to output `y`: the
/// checks of the cpu's poolGeometry (PoolWindows.cpp, whose header brings
/// the cpu's OpenMP loops), then its resolveWindowGeometry, with their
/// messages naming call.opType. `emptyWindow`: whether some window reads
/// no real input.
Expected<PoolShape> resolvePool(const CudaKernelCall &call,
                                const DeviceTensor &x, const DeviceTensor &y,
                                bool &emptyWindow) {
  llvm::StringRef op = call.opType;
  llvm::ArrayRef<int64_t> xs = x.shape, ys = y.shape;
  if (xs.size() < 3)
    return cudaKernelError(op +
                           ": input must have shape [N, C, spatial...], "
                           "got " +
                           formatShape(xs));
  if (ys.size() != xs.size() || ys[0] != xs[0] || ys[1] != xs[1])
    return cudaKernelError(op + ": output shape " + formatShape(ys) +
                           " does not match input shape " + formatShape(xs));
  llvm::ArrayRef<int64_t> kernel = call.attrs.getInts("kernel_shape");
  if (kernel.empty())
    return cudaKernelError(op + ": kernel_shape is required");
  if (xs.size() - 2 > static_cast<size_t>(kPoolAxes))
    return cudaKernelError("unsupported: " + op +
                           " with more than 3 spatial axes");
  bool ceilMode = call.attrs.getInt("ceil_mode", 0) != 0;
  auto g = cpu::resolveWindowGeometry(call.attrs, op, xs.drop_front(2),
                                      ys.drop_front(2), kernel, ceilMode,
                                      /*allowDilations=*/true);
  if (!g)
    return g.takeError();
  emptyWindow = g->hasEmptyWindow();
  return poolShapeOf(*g, xs[0] * xs[1]);
}

/// The cpu average pools' refusal of a window with nothing to divide by.
Error checkAverageDivisors(const PoolShape &p, bool countIncludePad,
                           llvm::StringRef op) {
  for (int a = 0; a < kPoolAxes; ++a)
    for (int64_t o = 0; o < p.out[a]; ++o) {
      PoolAxisWindow w = poolAxisWindow(p, a, o);
      int64_t n = countIncludePad ? w.padded : w.last - w.first;
      if (n <= 0)
        return cudaKernelError("unsupported: " + op +
                               " with a window that covers no input" +
                               Twine(countIncludePad ? " or padding" : ""));
    }
  return Error::success();
}

/// The cpu gradients' operand checks: dY, X (when given) and dX share one
/// float type and dX has X's shape.
Error checkPoolGradOperands(llvm::StringRef op, const DeviceTensor *dy,
                            const DeviceTensor *x, const DeviceTensor *dx,
                            bool needsX) {
  if (!dy || !dx || (needsX && !x))
    return cudaKernelError(op + (needsX ? ": needs inputs dY, X and output dX"
                                        : ": needs input dY and output dX"));
  if (!isFloatDType(dy->dtype) || dx->dtype != dy->dtype ||
      (x && x->dtype != dy->dtype))
    return cudaKernelError(op + ": unsupported element types (dY " +
                           dtypeName(dy->dtype) + ", dX " +
                           dtypeName(dx->dtype) + ")");
  if (x && x->shape != dx->shape)
    return cudaKernelError(op + ": dX " + formatShape(dx->shape) +
                           " must have the shape of X " +
                           formatShape(x->shape));
  return Error::success();
}

} // namespace

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

/// MaxPool(X) -> Y [, Indices], attributes as the cpu kernel (storage_order
/// orders Indices' spatial axes).
Error runMaxPool(const CudaKernelCall &call) {
  const DeviceTensor *x = call.input(0);
  DeviceTensor *y = call.output(0);
  DeviceTensor *indices = call.output(1);
  if (!x || !y)
    return cudaKernelError("MaxPool: needs input X and output Y");
  if (x->dtype == DType::Bool || y->dtype != x->dtype)
    return cudaKernelError("MaxPool: unsupported element types " +
                           dtypeName(x->dtype) + " -> " + dtypeName(y->dtype));
  if (indices && (indices->dtype != DType::I64 || indices->shape != y->shape))
    return cudaKernelError("MaxPool: Indices must be i64 with the shape of Y");
  bool emptyWindow = false;
  auto pool = resolvePool(call, *x, *y, emptyWindow);
  if (!pool)
    return pool.takeError();
  int64_t storageOrder = call.attrs.getInt("storage_order", 0);
  if (storageOrder != 0 && storageOrder != 1)
    return cudaKernelError("MaxPool: storage_order must be 0 or 1, got " +
                           Twine(storageOrder));
  if (emptyWindow)
    return cudaKernelError("unsupported: MaxPool with a window that lies "
                           "entirely in padding");
  const PoolShape &p = *pool;
  return dispatchFloat(x->dtype, call.opType, [&](auto tag) -> Error {
    using T = decltype(tag);
    int64_t n = p.planes * p.outPlane;
    if (n == 0)
      return Error::success();
    maxPoolKernel<T><<<gridFor(n, kThreads), kThreads, 0, call.stream>>>(
        p, static_cast<const T *>(x->data), static_cast<T *>(y->data),
        indices ? static_cast<int64_t *>(indices->data) : nullptr,
        storageOrder == 1);
    return checkLaunch("maxPoolKernel");
  });
}

/// AveragePool(X) -> Y, attributes as the cpu kernel (dilations honoured).
Error runAveragePool(const CudaKernelCall &call) {
  const DeviceTensor *x = call.input(0);
  DeviceTensor *y = call.output(0);
  if (!x || !y)
    return cudaKernelError("AveragePool: needs input X and output Y");
  if (!isFloatDType(x->dtype) || y->dtype != x->dtype)
    return cudaKernelError("AveragePool: unsupported element types " +
                           dtypeName(x->dtype) + " -> " + dtypeName(y->dtype));
  bool countIncludePad = call.attrs.getInt("count_include_pad", 0) != 0;
  bool emptyWindow = false;
  auto pool = resolvePool(call, *x, *y, emptyWindow);
  if (!pool)
    return pool.takeError();
  const PoolShape &p = *pool;
  if (Error e = checkAverageDivisors(p, countIncludePad, "AveragePool"))
    return e;
  return dispatchFloat(x->dtype, call.opType, [&](auto tag) -> Error {
    using T = decltype(tag);
    int64_t n = p.planes * p.outPlane;
    if (n == 0)
      return Error::success();
    averagePoolKernel<T><<<gridFor(n, kThreads), kThreads, 0, call.stream>>>(
        p, static_cast<const T *>(x->data), static_cast<T *>(y->data),
        countIncludePad);
    return checkLaunch("averagePoolKernel");
  });
}

/// GlobalAveragePool(X) -> Y: each [N, C] plane's mean.
Error runGlobalAveragePool(const CudaKernelCall &call) {
  const DeviceTensor *x = call.input(0);
  DeviceTensor *y = call.output(0);
  if (!x || !y)
    return cudaKernelError("GlobalAveragePool: needs input X and output Y");
  if (!isFloatDType(x->dtype) || y->dtype != x->dtype)
    return cudaKernelError("GlobalAveragePool: unsupported element types " +
                           dtypeName(x->dtype) + " -> " + dtypeName(y->dtype));
  if (x->shape.size() < 2 || y->shape.size() != x->shape.size() ||
      y->shape[0] != x->shape[0] || y->shape[1] != x->shape[1] ||
      y->numElements() != x->shape[0] * x->shape[1])
    return cudaKernelError(
        "GlobalAveragePool: output shape " + formatShape(y->shape) +
        " does not match input shape " + formatShape(x->shape));
  int64_t planes = x->shape[0] * x->shape[1];
  int64_t spatial = planes ? x->numElements() / planes : 0;
  return dispatchFloat(x->dtype, call.opType, [&](auto tag) -> Error {
    using T = decltype(tag);
    if (planes == 0)
      return Error::success();
    globalAveragePoolKernel<T>
        <<<gridFor(planes * 32, kThreads), kThreads, 0, call.stream>>>(
            static_cast<const T *>(x->data), static_cast<T *>(y->data), planes,
            spatial);
    return checkLaunch("globalAveragePoolKernel");
  });
}

/// zinc.MaxPoolGrad(dY, X) -> dX, with MaxPool's attributes.
Error runMaxPoolGrad(const CudaKernelCall &call) {
  const DeviceTensor *dy = call.input(0), *x = call.input(1);
  DeviceTensor *dx = call.output(0);
  if (Error e =
          checkPoolGradOperands("MaxPoolGrad", dy, x, dx, /*needsX=*/true))
    return e;
  bool emptyWindow = false;
  auto pool = resolvePool(call, *x, *dy, emptyWindow);
  if (!pool)
    return pool.takeError();
  if (emptyWindow)
    return cudaKernelError("unsupported: MaxPoolGrad with a window that lies "
                           "entirely in padding");
  const PoolShape &p = *pool;
  return dispatchFloat(x->dtype, call.opType, [&](auto tag) -> Error {
    using T = decltype(tag);
    int64_t n = p.planes * p.inPlane;
    if (n == 0)
      return Error::success();
    maxPoolGradKernel<T><<<gridFor(n, kThreads), kThreads, 0, call.stream>>>(
        p, static_cast<const T *>(dy->data), static_cast<const T *>(x->data),
        static_cast<T *>(dx->data));
    return checkLaunch("maxPoolGradKernel");
  });
}

/// zinc.AveragePoolGrad(dY) -> dX, with AveragePool's attributes; dX has
/// the forward input's shape.
Error runAveragePoolGrad(const CudaKernelCall &call) {
  const DeviceTensor *dy = call.input(0);
  DeviceTensor *dx = call.output(0);
  if (Error e = checkPoolGradOperands("AveragePoolGrad", dy, nullptr, dx,
                                      /*needsX=*/false))
    return e;
  bool countIncludePad = call.attrs.getInt("count_include_pad", 0) != 0;
  bool emptyWindow = false;
  auto pool = resolvePool(call, *dx, *dy, emptyWindow);
  if (!pool)
    return pool.takeError();
  const PoolShape &p = *pool;
  if (Error e = checkAverageDivisors(p, countIncludePad, "AveragePoolGrad"))
    return e;
  return dispatchFloat(dx->dtype, call.opType, [&](auto tag) -> Error {
    using T = decltype(tag);
    int64_t n = p.planes * p.inPlane;
    if (n == 0)
      return Error::success();
    averagePoolGradKernel<T>
        <<<gridFor(n, kThreads), kThreads, 0, call.stream>>>(
            p, static_cast<const T *>(dy->data), static_cast<T *>(dx->data),
            countIncludePad);
    return checkLaunch("averagePoolGradKernel");
  });
}

} // namespace zinc::cuda
