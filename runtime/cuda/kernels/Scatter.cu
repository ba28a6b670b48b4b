//===- Scatter.cu - ScatterND and ScatterElements on the GPU --------------===//
//
// The cpu kernels' semantics (runtime/cpu/kernels/Scatter.cpp): the output
// starts as the data, then each update is written (or combined: add, mul,
// max, min) at its place in index order, so a repeated index keeps the last
// update. To keep that order without atomics one block walks the updates in
// order, its threads sharing each ScatterND slice; the ops scatter labels
// and masks (T5's and Whisper's shift_tokens_right), small next to a step.
// An index out of range writes nothing (a kernel cannot fail the step
// without a synchronisation; the cpu refuses it).
//
//===----------------------------------------------------------------------===//
#include "ComputeTypes.cuh"
#include "CudaKernels.h"
#include "DeviceTypes.cuh"
#include "IndexingMath.h"
#include "zinc/runtime/cuda/CudaCheck.h"
#include "llvm/ADT/Twine.h"
#include <cstdint>

using llvm::Error;
using llvm::Twine;

namespace zinc::cuda {
namespace {
using misc::fromCompute;
using misc::toCompute;

enum class Combine { None, Add, Mul, Max, Min };

constexpr int kThreads = 256;

struct Shape8 {
  int rank = 0;
  int64_t d[kMaxViewRank] = {};
};

template <Combine kind, typename T> __device__ void combineInto(T &dst, T src) {
  if constexpr (kind == Combine::None) {
    dst = src;
  } else {
    auto a = toCompute(dst), b = toCompute(src);
    decltype(a) r = kind == Combine::Add   ? a + b
                    : kind == Combine::Mul ? a * b
                    : kind == Combine::Max ? (a < b ? b : a)
                                           : (b < a ? b : a);
    dst = fromCompute<T>(r);
  }
}

template <Combine kind, typename T, typename I>
__global__ void scatterNdKernel(T *out, const I *indices, const T *updates, int64_t tuples,
                                int k, int64_t slice, Shape8 data) {
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t target = scatterNdTarget(indices, t, k, data.d, data.rank);
    if (target >= 0)
      for (int64_t e = threadIdx.x; e < slice; e += blockDim.x)
        combineInto<kind>(out[target + e], updates[t * slice + e]);
    __syncthreads();
  }
}

/// ScatterElements: one thread walks the updates in order (each writes
/// one element, so the order is the whole of the work).
template <Combine kind, typename T, typename I>
__global__ void scatterElementsKernel(T *out, const I *indices, const T *updates, int64_t count,
                                      Shape8 upd, Shape8 data, int axis) {
  if (threadIdx.x != 0 || blockIdx.x != 0)
    return;
  for (int64_t p = 0; p < count; ++p) {
    int64_t index = wrapIndex(static_cast<int64_t>(indices[p]), data.d[axis]);
    if (index >= 0)
      combineInto<kind>(out[gatherElementsSource(p, upd.rank, upd.d, data.d, axis, index)],
                        updates[p]);
  }
}

llvm::Expected<Combine> combineOf(const CudaKernelCall &call) {
  llvm::StringRef r = call.attrs.getString("reduction", "none");
  if (r == "none")
    return Combine::None;
  if (r == "add")
    return Combine::Add;
  if (r == "mul")
    return Combine::Mul;
  if (r == "max")
    return Combine::Max;
  if (r == "min")
    return Combine::Min;
  return cudaKernelError(call.opType + ": unsupported reduction '" + r + "'");
}

llvm::Expected<Shape8> shapeOf(const CudaKernelCall &call, llvm::ArrayRef<int64_t> shape) {
  if (shape.size() > size_t(kMaxViewRank))
    return cudaKernelError("unsupported: " + call.opType + " of rank " + Twine(shape.size()) +
                           " on the cuda backend");
  Shape8 s;
  s.rank = static_cast<int>(shape.size());
  for (size_t i = 0; i < shape.size(); ++i)
    s.d[i] = shape[i];
  return s;
}

/// Calls fn(T{}, kind) with T the device type (an unsigned integer of the
/// element's size without a reduction: only bytes move).
template <typename Fn>
Error dispatchScatter(const CudaKernelCall &call, DType dtype, Combine kind, Fn &&fn) {
  if (kind == Combine::None) {
    switch (dtypeSize(dtype)) {
    case 1:
      return fn(uint8_t{});
    case 2:
      return fn(uint16_t{});
    case 4:
      return fn(uint32_t{});
    case 8:
      return fn(uint64_t{});
    }
  }
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
    return cudaKernelError("unsupported: " + call.opType + " with a reduction of " +
                           dtypeName(dtype) + " on the cuda backend (f32, f16, bf16, i32, i64)");
  }
}

/// Launches kernel<kind>(...) for the call's reduction.
template <template <Combine, typename, typename> class Launch, typename T, typename I,
          typename... Args>
Error launchFor(Combine kind, Args &&...args) {
  switch (kind) {
  case Combine::None:
    return Launch<Combine::None, T, I>::run(args...);
  case Combine::Add:
    return Launch<Combine::Add, T, I>::run(args...);
  case Combine::Mul:
    return Launch<Combine::Mul, T, I>::run(args...);
  case Combine::Max:
    return Launch<Combine::Max, T, I>::run(args...);
  case Combine::Min:
    return Launch<Combine::Min, T, I>::run(args...);
  }
  return Error::success();
}

template <Combine kind, typename T, typename I> struct LaunchNd {
  static Error run(cudaStream_t stream, void *out, const void *indices, const void *updates,
                   int64_t tuples, int k, int64_t slice, Shape8 data) {
    if constexpr (kind != Combine::None && std::is_unsigned_v<T>)
      return Error::success(); // not reached: reductions dispatch on types
    else
      scatterNdKernel<kind, T, I><<<1, kThreads, 0, stream>>>(
          static_cast<T *>(out), static_cast<const I *>(indices),
          static_cast<const T *>(updates), tuples, k, slice, data);
    return checkLaunch("scatterNdKernel");
  }
};

template <Combine kind, typename T, typename I> struct LaunchElements {
  static Error run(cudaStream_t stream, void *out, const void *indices, const void *updates,
                   int64_t count, Shape8 upd, Shape8 data, int axis) {
    if constexpr (kind != Combine::None && std::is_unsigned_v<T>)
      return Error::success(); // not reached: reductions dispatch on types
    else
      scatterElementsKernel<kind, T, I><<<1, 1, 0, stream>>>(
          static_cast<T *>(out), static_cast<const I *>(indices),
          static_cast<const T *>(updates), count, upd, data, axis);
    return checkLaunch("scatterElementsKernel");
  }
};

/// Checks the operands the scatters share and starts the output as the
/// data.
Error startScatter(const CudaKernelCall &call) {
  const DeviceTensor *data = call.input(0), *indices = call.input(1), *updates = call.input(2);
  const DeviceTensor *out = call.output(0);
  if (!data || !indices || !updates || !out)
    return cudaKernelError(call.opType + ": expects data, indices, updates and an output");
  if (updates->dtype != data->dtype || out->dtype != data->dtype || out->shape != data->shape)
    return cudaKernelError(call.opType + ": data, updates and output must share a type, and "
                                         "the output the data's shape");
  if (indices->dtype != DType::I64 && indices->dtype != DType::I32)
    return cudaKernelError(call.opType + ": indices must be i32 or i64");
  if (out->data != data->data && data->byteSize() > 0 &&
      cudaMemcpyAsync(out->data, data->data, data->byteSize(), cudaMemcpyDeviceToDevice,
                      call.stream) != cudaSuccess)
    return checkLaunch("cudaMemcpyAsync of the scattered data");
  return Error::success();
}

} // namespace

Error runScatterND(const CudaKernelCall &call) {
  if (Error e = startScatter(call))
    return e;
  const DeviceTensor &data = *call.input(0), &indices = *call.input(1), &updates = *call.input(2);
  auto kind = combineOf(call);
  if (!kind)
    return kind.takeError();
  if (indices.shape.empty())
    return cudaKernelError("ScatterND: indices must have rank >= 1");
  int64_t k = indices.shape.back();
  if (k == 0)
    return cudaKernelError("unsupported: ScatterND with empty index tuples (each replacing the "
                           "whole data) on the cuda backend");
  if (k > int64_t(data.shape.size()))
    return cudaKernelError("ScatterND: index tuples of length " + Twine(k) +
                           " for data of rank " + Twine(data.shape.size()));
  int64_t tuples = k ? indices.numElements() / k : 0, slice = 1;
  for (size_t d = k; d < data.shape.size(); ++d)
    slice *= data.shape[d];
  if (updates.numElements() != tuples * slice)
    return cudaKernelError("ScatterND: updates have " + Twine(updates.numElements()) +
                           " elements, expected " + Twine(tuples * slice));
  auto shape = shapeOf(call, data.shape);
  if (!shape)
    return shape.takeError();
  return dispatchScatter(call, data.dtype, *kind, [&](auto tag) -> Error {
    using T = decltype(tag);
    if (tuples == 0 || slice == 0)
      return Error::success();
    if (indices.dtype == DType::I64)
      return launchFor<LaunchNd, T, int64_t>(*kind, call.stream, call.output(0)->data,
                                              indices.data, updates.data, tuples, int(k),
                                              slice, *shape);
    return launchFor<LaunchNd, T, int32_t>(*kind, call.stream, call.output(0)->data,
                                            indices.data, updates.data, tuples, int(k), slice,
                                            *shape);
  });
}

Error runScatterElements(const CudaKernelCall &call) {
  if (Error e = startScatter(call))
    return e;
  const DeviceTensor &data = *call.input(0), &indices = *call.input(1), &updates = *call.input(2);
  auto kind = combineOf(call);
  if (!kind)
    return kind.takeError();
  if (indices.shape != updates.shape || indices.shape.size() != data.shape.size())
    return cudaKernelError(call.opType + ": indices and updates must have one shape, of the "
                                         "data's rank");
  int64_t rank = int64_t(data.shape.size()), axis = call.attrs.getInt("axis", 0);
  if (axis < -rank || axis >= rank)
    return cudaKernelError(call.opType + ": axis " + Twine(axis) + " is out of range for rank " +
                           Twine(rank));
  if (axis < 0)
    axis += rank;
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis && updates.shape[d] > data.shape[d])
      return cudaKernelError(call.opType + ": updates shape " + formatShape(updates.shape) +
                             " exceeds the data's " + formatShape(data.shape) + " on axis " +
                             Twine(d));
  auto dataShape = shapeOf(call, data.shape), updShape = shapeOf(call, updates.shape);
  if (!dataShape)
    return dataShape.takeError();
  if (!updShape)
    return updShape.takeError();
  int64_t count = updates.numElements();
  return dispatchScatter(call, data.dtype, *kind, [&](auto tag) -> Error {
    using T = decltype(tag);
    if (count == 0)
      return Error::success();
    if (indices.dtype == DType::I64)
      return launchFor<LaunchElements, T, int64_t>(*kind, call.stream, call.output(0)->data,
                                                    indices.data, updates.data, count,
                                                    *updShape, *dataShape, int(axis));
    return launchFor<LaunchElements, T, int32_t>(*kind, call.stream, call.output(0)->data,
                                                  indices.data, updates.data, count, *updShape,
                                                  *dataShape, int(axis));
  });
}

} // namespace zinc::cuda
