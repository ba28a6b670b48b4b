//===- Clip.cu - Clip and ClipGrad kernels --------------------------------===//
//
// Clip clamps every element between optional scalar bounds (inputs from
// opset 11, float attributes before); ClipGrad passes dy where the forward
// input lay strictly between them. Each is one grid-stride loop in the
// cpu's compute type (float for the 16-bit floats) with MiscMath.h's
// formulas, so results are the cpu kernels' bit for bit. A bound the host
// can read is passed by value; one in device memory is read by the kernel
// (ScalarOperand.h), never copied back.
//
//===----------------------------------------------------------------------===//
#include "ComputeTypes.cuh"
#include "CudaKernels.h"
#include "MiscMath.h"
#include "ScalarOperand.h"
#include "zinc/runtime/cuda/CudaCheck.h"
#include "llvm/ADT/Twine.h"
#include <cstdint>
#include <limits>
#include <type_traits>

namespace zinc::cuda {
namespace {

using llvm::Error;
using llvm::Twine;

constexpr unsigned kThreads = 256;

using misc::ComputeT;
using misc::fromCompute;
using misc::toCompute;

/// A bound as the kernel gets it: its value, or where on the device to
/// read it.
template <typename T> struct Bound {
  ComputeT<T> value;
  const T *device;

  __device__ ComputeT<T> get() const {
    return device ? toCompute(*device) : value;
  }
};

/// y = clip(x, lo, hi); x and y may be one buffer.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    clipKernel(const T *x, T *y, int64_t n, Bound<T> lo, Bound<T> hi) {
  ComputeT<T> l = lo.get(), h = hi.get();
  int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += step)
    y[i] = fromCompute<T>(misc::clipValue(toCompute(x[i]), l, h));
}

/// dx = dy where lo < x < hi, else 0; dx may share dy's buffer.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    clipGradKernel(const T *x, const T *dy, T *dx, int64_t n, Bound<T> lo,
                   Bound<T> hi) {
  ComputeT<T> l = lo.get(), h = hi.get();
  int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += step)
    dx[i] = fromCompute<T>(
        misc::clipGradValue(toCompute(x[i]), toCompute(dy[i]), l, h));
}

//===----------------------------------------------------------------------===//
// Host helpers
//===----------------------------------------------------------------------===//

/// Calls fn(T{}) for the element types the kernels are built for.
template <typename Fn>
Error dispatchClip(DType dtype, llvm::StringRef op, bool floatsOnly, Fn &&fn) {
  switch (dtype) {
  case DType::F32:
    return fn(float{});
  case DType::F16:
    return fn(__half{});
  case DType::BF16:
    return fn(__nv_bfloat16{});
  case DType::F64:
    return fn(double{});
  case DType::I32:
    if (!floatsOnly)
      return fn(int32_t{});
    break;
  case DType::I64:
    if (!floatsOnly)
      return fn(int64_t{});
    break;
  default:
    break;
  }
  return cudaKernelError("unsupported: " + op + " of " + dtypeName(dtype) +
                         " on the cuda backend (f32, f16, bf16, f64" +
                         (floatsOnly ? ")" : ", i32, i64)"));
}

/// The bound of operand `t` (checked to be a scalar of x's type), or
/// `absent` without one.
template <typename T>
llvm::Expected<Bound<T>> boundOf(const CudaKernelCall &call,
                                 const DeviceTensor *t, llvm::StringRef what,
                                 ComputeT<T> absent) {
  auto s = locateScalar(call, t, what);
  if (!s)
    return s.takeError();
  Bound<T> b{absent, static_cast<const T *>(s->device)};
  if (s->present && !s->device)
    b.value = toCompute(s->hostValue<T>());
  return b;
}

Error nullPointer(const CudaKernelCall &call) {
  return cudaKernelError(call.opType + ": null device pointer");
}

} // namespace

//===----------------------------------------------------------------------===//
// Clip
//===----------------------------------------------------------------------===//

/// Clip(input, [min], [max]) -> output from opset 11; Clip(input) {min,
/// max} before, where the attributes bound float types only (as on the cpu).
Error runClip(const CudaKernelCall &call) {
  const DeviceTensor *x = call.input(0);
  DeviceTensor *y = call.output(0);
  if (!x || !y)
    return cudaKernelError("Clip: expects input 0 and output 0");
  if (x->dtype != y->dtype)
    return cudaKernelError(call.opType + ": element types " +
                           dtypeName(x->dtype) + " and " + dtypeName(y->dtype) +
                           " differ");
  if (x->shape != y->shape)
    return cudaKernelError("Clip: output shape " + formatShape(y->shape) +
                           " differs from input shape " +
                           formatShape(x->shape));
  if (x->dtype == DType::Bool)
    return cudaKernelError("unsupported: " + call.opType +
                           " with element type bool");
  bool fromInputs = call.opsetVersion >= 11;
  if (fromInputs)
    for (size_t i : {1, 2}) {
      const DeviceTensor *b = call.input(i);
      const char *what = i == 1 ? "min" : "max";
      if (!b)
        continue;
      if (b->dtype != x->dtype)
        return cudaKernelError(call.opType + ": " + what +
                               " has element type " + dtypeName(b->dtype) +
                               ", expected " + dtypeName(x->dtype));
      if (b->numElements() != 1)
        return cudaKernelError(call.opType + ": " + what +
                               " must be a scalar, has shape " +
                               formatShape(b->shape));
    }
  return dispatchClip(x->dtype, call.opType, false, [&](auto tag) -> Error {
    using T = decltype(tag);
    using C = ComputeT<T>;
    C lo = misc::lowestValue<C>(), hi = misc::highestValue<C>();
    if (!fromInputs && std::is_floating_point_v<C>) {
      lo = static_cast<C>(
          call.attrs.getFloat("min", std::numeric_limits<float>::lowest()));
      hi = static_cast<C>(
          call.attrs.getFloat("max", std::numeric_limits<float>::max()));
    }
    auto l = boundOf<T>(call, fromInputs ? call.input(1) : nullptr, "min", lo);
    if (!l)
      return l.takeError();
    auto h = boundOf<T>(call, fromInputs ? call.input(2) : nullptr, "max", hi);
    if (!h)
      return h.takeError();
    int64_t n = x->numElements();
    if (n == 0)
      return Error::success();
    if (!x->data || !y->data)
      return nullPointer(call);
    clipKernel<T><<<gridFor(n, kThreads), kThreads, 0, call.stream>>>(
        static_cast<const T *>(x->data), static_cast<T *>(y->data), n, *l, *h);
    return checkLaunch("clipKernel (" + dtypeName(x->dtype) + ")");
  });
}

//===----------------------------------------------------------------------===//
// ClipGrad
//===----------------------------------------------------------------------===//

/// ClipGrad(x, dy, [min], [max]) -> dx: dy where min < x < max, else 0.
Error runClipGrad(const CudaKernelCall &call) {
  const DeviceTensor *x = call.input(0), *dy = call.input(1);
  DeviceTensor *dx = call.output(0);
  if (!x || !dy || !dx)
    return cudaKernelError(call.opType +
                           ": expects inputs (value, dy) and output dx");
  for (const DeviceTensor *t : {dy, static_cast<const DeviceTensor *>(dx)}) {
    if (t->dtype != x->dtype)
      return cudaKernelError(call.opType + ": element types " +
                             dtypeName(x->dtype) + " and " +
                             dtypeName(t->dtype) + " differ");
    if (t->shape != x->shape)
      return cudaKernelError(call.opType + ": shapes " + formatShape(x->shape) +
                             " and " + formatShape(t->shape) + " differ");
  }
  if (!isFloatDType(x->dtype))
    return cudaKernelError("unsupported: " + call.opType +
                           " with element type " + dtypeName(x->dtype));
  for (size_t i : {2, 3}) {
    const DeviceTensor *b = call.input(i);
    if (b && (b->dtype != x->dtype || b->numElements() != 1))
      return cudaKernelError(
          call.opType + ": " + (i == 2 ? "min" : "max") +
          " must be a scalar of type " + dtypeName(x->dtype) + ", has type " +
          dtypeName(b->dtype) + " and shape " + formatShape(b->shape));
  }
  return dispatchClip(x->dtype, call.opType, true, [&](auto tag) -> Error {
    using T = decltype(tag);
    using C = ComputeT<T>;
    auto l = boundOf<T>(call, call.input(2), "min", misc::lowestValue<C>());
    if (!l)
      return l.takeError();
    auto h = boundOf<T>(call, call.input(3), "max", misc::highestValue<C>());
    if (!h)
      return h.takeError();
    int64_t n = x->numElements();
    if (n == 0)
      return Error::success();
    if (!x->data || !dy->data || !dx->data)
      return nullPointer(call);
    clipGradKernel<T><<<gridFor(n, kThreads), kThreads, 0, call.stream>>>(
        static_cast<const T *>(x->data), static_cast<const T *>(dy->data),
        static_cast<T *>(dx->data), n, *l, *h);
    return checkLaunch("clipGradKernel (" + dtypeName(x->dtype) + ")");
  });
}

} // namespace zinc::cuda
