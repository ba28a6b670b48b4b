//===- ReduceMax.cu - ReduceMax and ReduceMaxGrad kernels -----------------===//
//
// ReduceMax is ReduceSum's reduction (RowsMath.h's plans: kept and reduced
// groups coalesced, a warp per contiguous row, 32x32 tiles for few long
// columns, a thread per output otherwise) with the cpu's maximum, in which
// NaN wins. A maximum does not depend on the order it is taken in, so every
// layout gives the cpu's values exactly. Axes given as an input are read on
// the host where the host may read them; in device memory they are matched
// on the device against the readings the shapes allow, as ReduceSum does.
//
// ReduceMaxGrad gives dy to the elements equal to the maximum, shared
// evenly by ties as the cpu does: per output, one pass counts its ties and
// a second writes its dx, a warp per contiguous row or a thread per output,
// without atomics or scratch.
//
//===----------------------------------------------------------------------===//
#include "ComputeTypes.cuh"
#include "CudaKernels.h"
#include "MiscMath.h"
#include "ReducePlanning.h"
#include "RowsMath.h"
#include "zinc/runtime/cuda/CudaCheck.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/Twine.h"
#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace zinc::cuda {
namespace {

using llvm::ArrayRef;
using llvm::Error;
using llvm::SmallVector;
using llvm::Twine;
using misc::ComputeT;
using misc::fromCompute;
using misc::toCompute;

/// Column kernel's block: 32 columns by 32 row phases.
constexpr int kTile = 32;
/// Blocks of the row kernels: rows beyond this are a grid-stride loop.
constexpr int64_t kMaxRowBlocks = 132 * 32;
constexpr unsigned kThreads = 256;

//===----------------------------------------------------------------------===//
// Device helpers
//===----------------------------------------------------------------------===//

/// __shfl_xor_sync for every compute type (64-bit integers as long long).
template <typename C> __device__ __forceinline__ C shflXor(C v, int m) {
  if constexpr (std::is_integral_v<C> && sizeof(C) == 8)
    return static_cast<C>(
        __shfl_xor_sync(0xffffffffu, static_cast<long long>(v), m));
  else
    return __shfl_xor_sync(0xffffffffu, v, m);
}

/// The maximum of every lane's `a`, in every lane.
template <typename C> __device__ __forceinline__ C warpMax(C a) {
#pragma unroll
  for (int m = 16; m > 0; m /= 2)
    a = misc::maxCombine(a, shflXor(a, m));
  return a;
}

__device__ __forceinline__ long long warpCount(long long n) {
#pragma unroll
  for (int m = 16; m > 0; m /= 2)
    n += __shfl_xor_sync(0xffffffffu, n, m);
  return n;
}

//===----------------------------------------------------------------------===//
// ReduceMax kernels
//===----------------------------------------------------------------------===//

/// out[o] = max(in[o, :]) for [outer, red]: one warp per output. `init` is
/// the maximum of nothing (-inf, or an integer type's lowest).
template <typename T>
__global__ void reduceMaxRowsKernel(const T *__restrict__ in,
                                    T *__restrict__ out, int64_t outer,
                                    int64_t red, ComputeT<T> init) {
  int lane = threadIdx.x % 32;
  int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  for (int64_t o = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
       o < outer; o += warps) {
    const T *row = in + o * red;
    ComputeT<T> a = init;
    for (int64_t j = lane; j < red; j += 32)
      a = misc::maxCombine(a, toCompute(row[j]));
    a = warpMax(a);
    if (lane == 0)
      out[o] = fromCompute<T>(a);
  }
}

/// out[o, i] = max_j in[o, j, i] for [outer, red, inner] with many rows and
/// few columns: block (32, 32) per 32 columns of one o.
template <typename T>
__global__ void reduceMaxColumnsKernel(const T *__restrict__ in,
                                       T *__restrict__ out, int64_t outer,
                                       int64_t red, int64_t inner,
                                       ComputeT<T> init) {
  __shared__ ComputeT<T> partial[kTile][kTile + 1];
  int tx = threadIdx.x, ty = threadIdx.y;
  int64_t i = int64_t(blockIdx.x) * kTile + tx;
  for (int64_t o = blockIdx.y; o < outer; o += gridDim.y) {
    ComputeT<T> a = init;
    if (i < inner)
      for (int64_t j = ty; j < red; j += kTile)
        a = misc::maxCombine(a, toCompute(in[(o * red + j) * inner + i]));
    partial[ty][tx] = a;
    __syncthreads();
    if (ty == 0 && i < inner) {
      ComputeT<T> m = init;
      for (int k = 0; k < kTile; ++k)
        m = misc::maxCombine(m, partial[k][tx]);
      out[o * inner + i] = fromCompute<T>(m);
    }
    __syncthreads();
  }
}

/// Any reduction: one thread per output, looping over its reduced elements
/// (the innermost reduced dimension without divisions). Outputs are NaN (0
/// for integers) when the device's axes match none of the plans.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    reduceMaxGenericKernel(const T *__restrict__ in, T *__restrict__ out,
                           int64_t outCount, ReduceChoices c, ComputeT<T> init,
                           ComputeT<T> poison) {
  int pick = 0;
  if (c.count > 1) {
    int64_t mask = c.axes64
                       ? effectiveAxesMask(static_cast<const int64_t *>(c.axes),
                                           c.axesCount, c.rank, c.dims)
                       : effectiveAxesMask(static_cast<const int32_t *>(c.axes),
                                           c.axesCount, c.rank, c.dims);
    pick = -1;
    for (int k = 0; k < c.count; ++k)
      if (c.masks[k] == mask)
        pick = k;
  }
  int64_t step = int64_t(gridDim.x) * blockDim.x;
  int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (pick < 0) {
    for (int64_t o = first; o < outCount; o += step)
      out[o] = fromCompute<T>(poison);
    return;
  }
  const ReducePlan &p = c.plans[pick];
  bool anyReduced = p.rank > p.keptRank;
  int64_t len = anyReduced ? p.dims[p.rank - 1] : 1;
  int64_t lenStride = anyReduced ? p.strides[p.rank - 1] : 0;
  int64_t runs = len ? p.redCount / len : 0;
  for (int64_t o = first; o < outCount; o += step) {
    int64_t base = reduceBase(p, o);
    ComputeT<T> a = init;
    for (int64_t r = 0; r < runs; ++r) {
      const T *run = in + base + reduceOffset(p, r * len);
      for (int64_t l = 0; l < len; ++l)
        a = misc::maxCombine(a, toCompute(run[l * lenStride]));
    }
    out[o] = fromCompute<T>(a);
  }
}

//===----------------------------------------------------------------------===//
// ReduceMaxGrad kernels
//===----------------------------------------------------------------------===//

/// dx for [outer, red] reduced over red: a warp per output counts the
/// elements equal to y[o], then writes every element's share of dy[o]. dx
/// may be x's buffer: every element is written after the count, by the
/// lane that reads it.
template <typename T>
__global__ void maxGradRowsKernel(const T *x, const T *y, const T *dy, T *dx,
                                  int64_t outer, int64_t red) {
  int lane = threadIdx.x % 32;
  int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  for (int64_t o = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
       o < outer; o += warps) {
    const T *row = x + o * red;
    ComputeT<T> m = toCompute(y[o]), g = toCompute(dy[o]);
    long long ties = 0;
    for (int64_t j = lane; j < red; j += 32)
      ties += toCompute(row[j]) == m;
    ties = warpCount(ties);
    for (int64_t j = lane; j < red; j += 32)
      dx[o * red + j] = fromCompute<T>(misc::reduceMaxGradValue(
          toCompute(row[j]), m, g, static_cast<int64_t>(ties)));
  }
}

/// dx for any reduction: a thread per output (for [N, C] reduced over N,
/// the threads of a warp read neighbouring columns).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    maxGradGenericKernel(const T *x, const T *y, const T *dy, T *dx,
                         ReducePlan p) {
  bool anyReduced = p.rank > p.keptRank;
  int64_t len = anyReduced ? p.dims[p.rank - 1] : 1;
  int64_t lenStride = anyReduced ? p.strides[p.rank - 1] : 0;
  int64_t runs = len ? p.redCount / len : 0;
  int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t o = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
       o < p.outCount; o += step) {
    int64_t base = reduceBase(p, o);
    ComputeT<T> m = toCompute(y[o]), g = toCompute(dy[o]);
    int64_t ties = 0;
    for (int64_t r = 0; r < runs; ++r) {
      const T *run = x + base + reduceOffset(p, r * len);
      for (int64_t l = 0; l < len; ++l)
        ties += toCompute(run[l * lenStride]) == m;
    }
    for (int64_t r = 0; r < runs; ++r) {
      int64_t at = base + reduceOffset(p, r * len);
      for (int64_t l = 0; l < len; ++l) {
        int64_t k = at + l * lenStride;
        dx[k] = fromCompute<T>(
            misc::reduceMaxGradValue(toCompute(x[k]), m, g, ties));
      }
    }
  }
}

//===----------------------------------------------------------------------===//
// Host helpers
//===----------------------------------------------------------------------===//

unsigned rowBlocks(int64_t rows) {
  return static_cast<unsigned>(std::clamp<int64_t>(rows, 1, kMaxRowBlocks));
}

Error maxTypeError(llvm::StringRef op, DType dtype) {
  return cudaKernelError("unsupported: " + op + " of " + dtypeName(dtype) +
                         " on the cuda backend (f32, f16, bf16, i32, i64)");
}

/// Calls fn(T{}) for ReduceMax's types (ReduceSum's on the cuda backend).
template <typename Fn>
Error dispatchMax(DType dtype, llvm::StringRef op, Fn &&fn) {
  switch (dtype) {
  case DType::F32:
    return fn(float{});
  case DType::F16:
    return fn(__half{});
  case DType::BF16:
    return fn(__nv_bfloat16{});
  case DType::I32:
    return fn(int32_t{});
  case DType::I64:
    return fn(int64_t{});
  default:
    return maxTypeError(op, dtype);
  }
}

/// Whether dispatchMax takes `dtype`.
bool isMaxType(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 ||
         t == DType::I32 || t == DType::I64;
}

/// Queues the maximum of `in` into `out` for `choices`, through the fast
/// kernels where a single plan has the [outer, red, inner] form.
template <typename T>
Error launchReduceMax(const T *in, T *out, const ReduceChoices &choices,
                      cudaStream_t stream) {
  using C = ComputeT<T>;
  C init = misc::lowestValue<C>();
  const ReducePlan &p = choices.plans[0];
  int64_t outer, red, inner;
  if (choices.count == 1 && reduceAsMiddle(p, outer, red, inner)) {
    if (inner == 1) {
      int64_t blocks = (outer + kThreads / 32 - 1) / (kThreads / 32);
      reduceMaxRowsKernel<T><<<rowBlocks(blocks), kThreads, 0, stream>>>(
          in, out, outer, red, init);
      return checkLaunch("reduceMaxRowsKernel");
    }
    if (red >= 4 * kTile && p.outCount < (int64_t(1) << 16)) {
      dim3 grid(static_cast<unsigned>((inner + kTile - 1) / kTile),
                static_cast<unsigned>(std::min<int64_t>(outer, 65535)));
      reduceMaxColumnsKernel<T><<<grid, dim3(kTile, kTile), 0, stream>>>(
          in, out, outer, red, inner, init);
      return checkLaunch("reduceMaxColumnsKernel");
    }
  }
  C poison;
  if constexpr (std::is_integral_v<C>)
    poison = 0;
  else
    poison = std::numeric_limits<C>::quiet_NaN();
  reduceMaxGenericKernel<T>
      <<<gridFor(p.outCount, kThreads), kThreads, 0, stream>>>(
          in, out, p.outCount, choices, init, poison);
  return checkLaunch("reduceMaxGenericKernel");
}

Error tooManyGroups(const CudaKernelCall &call, ArrayRef<int64_t> shape) {
  return cudaKernelError(
      "unsupported: " + call.opType + " of " + formatShape(shape) +
      " on the cuda backend: more than " + Twine(kMaxViewRank) +
      " alternating kept and reduced dimensions");
}

} // namespace

//===----------------------------------------------------------------------===//
// ReduceMax
//===----------------------------------------------------------------------===//

/// ReduceMax(data, [axes]) -> reduced; attributes axes (before opset 18),
/// keepdims and noop_with_empty_axes, as the cpu kernel reads them.
Error runReduceMax(const CudaKernelCall &call) {
  const DeviceTensor *x = call.input(0);
  DeviceTensor *y = call.output(0);
  if (!x || !y)
    return cudaKernelError(call.opType + ": missing input or output");
  if (x->dtype != y->dtype)
    return cudaKernelError(call.opType + ": output element type " +
                           dtypeName(y->dtype) + " differs from input " +
                           dtypeName(x->dtype));
  if (x->dtype == DType::Bool)
    return cudaKernelError("unsupported: " + call.opType +
                           " with element type bool");
  if (!isMaxType(x->dtype))
    return maxTypeError(call.opType, x->dtype);
  ReduceChoices choices;
  bool done;
  if (Error e = planReduceChoices(call, /*readHostAxes=*/true, choices, done))
    return e;
  if (done)
    return Error::success();
  return dispatchMax(x->dtype, call.opType, [&](auto tag) -> Error {
    using T = decltype(tag);
    if (y->numElements() == 0)
      return Error::success();
    if (!y->data || (x->numElements() > 0 && !x->data))
      return cudaKernelError(call.opType + ": null device pointer");
    return launchReduceMax<T>(static_cast<const T *>(x->data),
                              static_cast<T *>(y->data), choices, call.stream);
  });
}

//===----------------------------------------------------------------------===//
// ReduceMaxGrad(x, y, dy) -> dx; y and dy keep the reduced axes as size 1
//===----------------------------------------------------------------------===//

Error runReduceMaxGrad(const CudaKernelCall &call) {
  const DeviceTensor *x = call.input(0), *y = call.input(1),
                     *dy = call.input(2);
  DeviceTensor *dx = call.output(0);
  if (!x || !y || !dy || !dx)
    return cudaKernelError(
        "ReduceMaxGrad: expects inputs (x, y, dy) and output dx");
  if (!isFloatDType(x->dtype))
    return cudaKernelError("unsupported: " + call.opType +
                           " with element type " + dtypeName(x->dtype));
  for (const DeviceTensor *t : {y, dy, static_cast<const DeviceTensor *>(dx)})
    if (t->dtype != x->dtype)
      return cudaKernelError(call.opType + ": element types " +
                             dtypeName(x->dtype) + " and " +
                             dtypeName(t->dtype) + " differ");
  auto requireShape = [&](const char *what, const DeviceTensor &t,
                          ArrayRef<int64_t> expected) -> Error {
    if (ArrayRef<int64_t>(t.shape) == expected)
      return Error::success();
    return cudaKernelError(call.opType + ": " + what + " has shape " +
                           formatShape(t.shape) + ", expected " +
                           formatShape(expected));
  };
  if (Error e = requireShape("dx", *dx, x->shape))
    return e;
  if (Error e = requireShape("dy", *dy, y->shape))
    return e;
  size_t rank = x->shape.size();
  bool kept = y->shape.size() == rank;
  for (size_t d = 0; kept && d < rank; ++d)
    kept = y->shape[d] == x->shape[d] || y->shape[d] == 1;
  if (!kept)
    return cudaKernelError(
        "ReduceMaxGrad: y has shape " + formatShape(y->shape) + ", not x's " +
        formatShape(x->shape) + " with reduced axes of size 1");
  SmallVector<bool, 8> reduced(rank, false);
  for (size_t d = 0; d < rank; ++d)
    reduced[d] = y->shape[d] != x->shape[d];
  ReducePlan plan;
  if (!planReduce(x->shape, reduced, plan))
    return tooManyGroups(call, x->shape);
  return dispatchFloat(x->dtype, call.opType, [&](auto tag) -> Error {
    using T = decltype(tag);
    if (x->numElements() == 0)
      return Error::success();
    if (!x->data || !y->data || !dy->data || !dx->data)
      return cudaKernelError(call.opType + ": null device pointer");
    const T *px = static_cast<const T *>(x->data),
            *py = static_cast<const T *>(y->data),
            *pg = static_cast<const T *>(dy->data);
    T *po = static_cast<T *>(dx->data);
    int64_t outer, red, inner;
    if (reduceAsMiddle(plan, outer, red, inner) && inner == 1) {
      int64_t blocks = (outer + kThreads / 32 - 1) / (kThreads / 32);
      maxGradRowsKernel<T><<<rowBlocks(blocks), kThreads, 0, call.stream>>>(
          px, py, pg, po, outer, red);
      return checkLaunch("maxGradRowsKernel");
    }
    maxGradGenericKernel<T>
        <<<gridFor(plan.outCount, kThreads), kThreads, 0, call.stream>>>(
            px, py, pg, po, plan);
    return checkLaunch("maxGradGenericKernel");
  });
}

} // namespace zinc::cuda
