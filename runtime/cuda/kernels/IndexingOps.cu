//===- IndexingOps.cu - CumSum, ArgMax/ArgMin, Tile, GatherElements, ------===//
//                      Pad, HardSigmoid and their gradients on the GPU
//
// What the model families of the zoo compute from data at run time
// (position ids from an attention mask, CLIP's end-of-text position, rotary
// tables, MobileNetV3's gates), with the cpu kernels' semantics and the
// per-line / per-element math of IndexingMath.h:
//  - CumSum and ArgMax/ArgMin: one thread per line of the [outer, n, inner]
//    view around the axis (floats accumulate in double, integers wrap);
//  - Tile, GatherElements and Pad: one thread per output element, moving
//    bytes; constant Pad's gradient one per input element (a crop of dy);
//    a GatherElements index out of range reads zero (a kernel cannot fail
//    the step without a synchronisation; Gather does the same);
//  - HardSigmoid and HardSigmoidGrad: elementwise, in float.
// The scalar operands (CumSum's axis, Tile's repeats) are read on the host,
// as Slice reads its lists.
//
//===----------------------------------------------------------------------===//
#include "ComputeTypes.cuh"
#include "CudaKernels.h"
#include "DeviceTypes.cuh"
#include "IndexingMath.h"
#include "PadGeometry.h"
#include "zinc/runtime/cuda/CudaCheck.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/Twine.h"
#include <cstdint>
#include <cstring>
#include <type_traits>

using llvm::Error;
using llvm::Twine;

namespace zinc::cuda {

llvm::Expected<bool> isHostReadable(const void *p); // DataMovement.cu

namespace {
using misc::ComputeT;
using misc::fromCompute;
using misc::toCompute;

constexpr int kThreads = 256;

unsigned blocksFor(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

/// The integers of a small i32/i64 operand in host-readable memory.
llvm::Expected<llvm::SmallVector<int64_t, 6>> hostInts(const CudaKernelCall &call,
                                                       const DeviceTensor &t,
                                                       llvm::StringRef what) {
  if (t.dtype != DType::I64 && t.dtype != DType::I32)
    return cudaKernelError(call.opType + ": " + what + " must be i32 or i64, not " +
                           dtypeName(t.dtype));
  llvm::SmallVector<int64_t, 6> v;
  if (t.numElements() == 0)
    return v;
  auto readable = isHostReadable(t.data);
  if (!readable)
    return readable.takeError();
  if (!*readable)
    return cudaKernelError("unsupported: " + call.opType + " with its " + what +
                           " in device memory on the cuda backend");
  for (int64_t i = 0; i < t.numElements(); ++i)
    v.push_back(t.dtype == DType::I64 ? static_cast<const int64_t *>(t.data)[i]
                                      : static_cast<const int32_t *>(t.data)[i]);
  return v;
}

llvm::Expected<int> axisIn(const CudaKernelCall &call, int64_t axis, int64_t rank) {
  int64_t r = rank > 0 ? rank : 1;
  if (axis < -r || axis >= r)
    return cudaKernelError(call.opType + ": axis " + Twine(axis) + " is out of range for rank " +
                           Twine(rank));
  return static_cast<int>(axis < 0 ? axis + r : axis);
}

/// Calls fn(T{}) for the numeric types these kernels take.
template <typename Fn> Error dispatchNumeric(DType dtype, llvm::StringRef op, Fn &&fn) {
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
    return cudaKernelError("unsupported: " + op + " of " + dtypeName(dtype) +
                           " on the cuda backend (f32, f16, bf16, i32, i64)");
  }
}

/// The accumulator of CumSum for T: double for floats, T for integers.
template <typename T, bool = std::is_integral_v<T>> struct ScanAccOf { using type = double; };
template <typename T> struct ScanAccOf<T, true> { using type = std::make_unsigned_t<T>; };
template <typename T> using ScanAcc = typename ScanAccOf<T>::type;

template <typename T>
__global__ void cumSumKernel(const T *x, T *y, LineView v, bool exclusive, bool reverse) {
  int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= v.lines())
    return;
  int64_t s = v.start(c);
  using Acc = ScanAcc<T>;
  cumSumLine<Acc>(
      x + s, y + s, v.n, v.inner, exclusive, reverse,
      [](T e) { return static_cast<Acc>(toCompute(e)); },
      [](Acc a) { return fromCompute<T>(static_cast<ComputeT<T>>(a)); });
}

template <bool isMax, typename T>
__global__ void argExtremumKernel(const T *x, int64_t *y, LineView v, bool last) {
  int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= v.lines())
    return;
  const T *line = x + v.start(c);
  int64_t inner = v.inner;
  y[c] = argExtremum<isMax, ComputeT<T>>(v.n, last,
                                          [&](int64_t k) { return toCompute(line[k * inner]); });
}

/// Shapes passed by value to the byte-moving kernels.
struct Dims8 {
  int rank = 0;
  int64_t d[kMaxViewRank] = {};
};

template <typename U>
__global__ void tileKernel(const U *x, U *y, int64_t n, Dims8 out, Dims8 in) {
  int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e < n)
    y[e] = x[tileSource(e, out.rank, out.d, in.d)];
}

template <typename U, typename I>
__global__ void gatherElementsKernel(const U *data, const I *indices, U *y, int64_t n, Dims8 out,
                                     Dims8 dataDims, int axis) {
  int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= n)
    return;
  int64_t index = wrapIndex(static_cast<int64_t>(indices[e]), dataDims.d[axis]);
  y[e] = index < 0 ? U{} : data[gatherElementsSource(e, out.rank, out.d, dataDims.d, axis, index)];
}

template <typename T>
__global__ void hardSigmoidKernel(const T *x, T *y, int64_t n, float alpha, float beta) {
  int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e < n)
    y[e] = storeF<T>(hardSigmoid(loadF(x[e]), alpha, beta));
}

template <typename T>
__global__ void hardSigmoidGradKernel(const T *x, const T *dy, T *dx, int64_t n, float alpha,
                                      float beta) {
  int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e < n)
    dx[e] = storeF<T>(hardSigmoidGrad(loadF(x[e]), loadF(dy[e]), alpha, beta));
}

template <typename U>
__global__ void padKernel(const U *x, U *y, int64_t n, PadView v, U constant) {
  int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= n)
    return;
  int64_t src = padSourceElement(v, e);
  y[e] = src < 0 ? constant : x[src];
}

template <typename U>
__global__ void constantPadGradKernel(const U *dy, U *dx, int64_t n, PadView v) {
  int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= n)
    return;
  int64_t dst = padTargetElement(v, e);
  dx[e] = dst < 0 ? U{} : dy[dst];
}

/// Pad's geometry through the cpu's reading of its operands (pads, and
/// axes from opset 18, read on the host as every index list is).
llvm::Expected<PadView> padViewOf(const CudaKernelCall &call, llvm::ArrayRef<int64_t> inShape,
                                  llvm::ArrayRef<int64_t> outShape, size_t padsInput,
                                  size_t axesInput) {
  llvm::SmallVector<cpu::TensorRef, 4> refs(call.inputs.size());
  llvm::SmallVector<const cpu::TensorRef *, 4> ins(call.inputs.size(), nullptr);
  for (size_t i : {padsInput, axesInput}) {
    const DeviceTensor *t = call.input(i);
    if (!t || (i == padsInput && call.opsetVersion < 11 && call.opType == "Pad"))
      continue;
    if (t->numElements() > 0) {
      auto readable = isHostReadable(t->data);
      if (!readable)
        return readable.takeError();
      if (!*readable)
        return cudaKernelError("unsupported: " + call.opType + " with its " +
                               (i == padsInput ? "pads" : "axes") +
                               " in device memory on the cuda backend");
    }
    refs[i].dtype = t->dtype;
    refs[i].shape.assign(t->shape.begin(), t->shape.end());
    refs[i].data = t->data;
    ins[i] = &refs[i];
  }
  cpu::KernelCall cpuCall{call.opType, call.nodeName, call.opsetVersion, call.attrs, ins, {}};
  auto g = cpu::padGeometry(cpuCall, inShape, outShape, padsInput, axesInput);
  if (!g)
    return g.takeError();
  if (inShape.size() > size_t(kMaxViewRank))
    return cudaKernelError("unsupported: " + call.opType + " of rank " +
                           Twine(inShape.size()) + " on the cuda backend");
  PadView v;
  v.rank = static_cast<int>(inShape.size());
  v.mode = static_cast<PadMode>(static_cast<int>(g->mode));
  for (int d = 0; d < v.rank; ++d) {
    v.in[d] = inShape[d];
    v.out[d] = outShape[d];
    v.before[d] = g->before[d];
  }
  return v;
}

/// Calls fn(U{}) with U an unsigned integer of `bytes` bytes.
template <typename Fn> Error dispatchBytes(size_t bytes, llvm::StringRef op, Fn &&fn) {
  switch (bytes) {
  case 1:
    return fn(uint8_t{});
  case 2:
    return fn(uint16_t{});
  case 4:
    return fn(uint32_t{});
  case 8:
    return fn(uint64_t{});
  default:
    return cudaKernelError("unsupported: " + op + " of " + Twine(bytes) + "-byte elements");
  }
}

llvm::Expected<Dims8> dims8(const CudaKernelCall &call, llvm::ArrayRef<int64_t> shape) {
  if (shape.size() > size_t(kMaxViewRank))
    return cudaKernelError("unsupported: " + call.opType + " of rank " + Twine(shape.size()) +
                           " on the cuda backend (at most " + Twine(kMaxViewRank) + ")");
  Dims8 d;
  d.rank = static_cast<int>(shape.size());
  for (size_t k = 0; k < shape.size(); ++k)
    d.d[k] = shape[k];
  return d;
}

template <bool isMax> Error runArgExtremum(const CudaKernelCall &call) {
  const DeviceTensor *x = call.input(0);
  DeviceTensor *y = call.output(0);
  if (!x || !y)
    return cudaKernelError(call.opType + ": expects an input and an output");
  if (y->dtype != DType::I64)
    return cudaKernelError(call.opType + ": the output must be i64");
  auto axis = axisIn(call, call.attrs.getInt("axis", 0), int64_t(x->shape.size()));
  if (!axis)
    return axis.takeError();
  LineView v = lineView(x->shape.data(), int(x->shape.size()), *axis);
  if (y->numElements() != v.lines())
    return cudaKernelError(call.opType + ": the output does not match the input reduced along axis " +
                           Twine(*axis));
  if (v.n == 0 && v.lines() > 0)
    return cudaKernelError(call.opType + ": cannot reduce an empty axis");
  bool last = call.attrs.getInt("select_last_index", 0) != 0;
  return dispatchNumeric(x->dtype, call.opType, [&](auto tag) -> Error {
    using T = decltype(tag);
    if (v.lines() == 0)
      return Error::success();
    argExtremumKernel<isMax, T><<<blocksFor(v.lines()), kThreads, 0, call.stream>>>(
        static_cast<const T *>(x->data), static_cast<int64_t *>(y->data), v, last);
    return checkLaunch("argExtremumKernel");
  });
}

} // namespace

Error runCumSum(const CudaKernelCall &call) {
  const DeviceTensor *x = call.input(0), *axisT = call.input(1);
  DeviceTensor *y = call.output(0);
  if (!x || !axisT || !y)
    return cudaKernelError("CumSum: expects x, axis and an output");
  if (x->dtype != y->dtype || x->shape != y->shape)
    return cudaKernelError("CumSum: output type or shape differs from the input's");
  auto axisList = hostInts(call, *axisT, "axis");
  if (!axisList)
    return axisList.takeError();
  if (axisList->size() != 1)
    return cudaKernelError("CumSum: axis must be a scalar");
  auto axis = axisIn(call, (*axisList)[0], int64_t(x->shape.size()));
  if (!axis)
    return axis.takeError();
  LineView v = lineView(x->shape.data(), int(x->shape.size()), *axis);
  bool exclusive = call.attrs.getInt("exclusive", 0) != 0;
  bool reverse = call.attrs.getInt("reverse", 0) != 0;
  return dispatchNumeric(x->dtype, call.opType, [&](auto tag) -> Error {
    using T = decltype(tag);
    if (v.lines() == 0 || v.n == 0)
      return Error::success();
    cumSumKernel<T><<<blocksFor(v.lines()), kThreads, 0, call.stream>>>(
        static_cast<const T *>(x->data), static_cast<T *>(y->data), v, exclusive, reverse);
    return checkLaunch("cumSumKernel");
  });
}

Error runArgMax(const CudaKernelCall &call) { return runArgExtremum<true>(call); }
Error runArgMin(const CudaKernelCall &call) { return runArgExtremum<false>(call); }

Error runTile(const CudaKernelCall &call) {
  const DeviceTensor *in = call.input(0), *repeats = call.input(1);
  DeviceTensor *out = call.output(0);
  if (!in || !repeats || !out)
    return cudaKernelError("Tile: expects input, repeats and an output");
  if (in->dtype != out->dtype || in->shape.size() != out->shape.size())
    return cudaKernelError("Tile: output type or rank differs from the input's");
  auto reps = hostInts(call, *repeats, "repeats");
  if (!reps)
    return reps.takeError();
  if (reps->size() != in->shape.size())
    return cudaKernelError("Tile: repeats has " + Twine(reps->size()) +
                           " entries for an input of rank " + Twine(in->shape.size()));
  for (size_t d = 0; d < reps->size(); ++d)
    if ((*reps)[d] < 0 || in->shape[d] * (*reps)[d] != out->shape[d])
      return cudaKernelError("Tile: dimension " + Twine(d) + " of size " + Twine(in->shape[d]) +
                             " repeated " + Twine((*reps)[d]) + " times is not the output's " +
                             Twine(out->shape[d]));
  auto outDims = dims8(call, out->shape), inDims = dims8(call, in->shape);
  if (!outDims)
    return outDims.takeError();
  if (!inDims)
    return inDims.takeError();
  int64_t n = out->numElements();
  return dispatchBytes(dtypeSize(in->dtype), call.opType, [&](auto tag) -> Error {
    using U = decltype(tag);
    if (n == 0)
      return Error::success();
    tileKernel<U><<<blocksFor(n), kThreads, 0, call.stream>>>(
        static_cast<const U *>(in->data), static_cast<U *>(out->data), n, *outDims, *inDims);
    return checkLaunch("tileKernel");
  });
}

Error runGatherElements(const CudaKernelCall &call) {
  const DeviceTensor *data = call.input(0), *indices = call.input(1);
  DeviceTensor *out = call.output(0);
  if (!data || !indices || !out)
    return cudaKernelError("GatherElements: expects data, indices and an output");
  if (out->dtype != data->dtype || out->shape != indices->shape ||
      indices->shape.size() != data->shape.size())
    return cudaKernelError("GatherElements: the output must have the data's type and the "
                           "indices' shape, of the data's rank");
  if (indices->dtype != DType::I64 && indices->dtype != DType::I32)
    return cudaKernelError("GatherElements: indices must be i32 or i64");
  auto axis = axisIn(call, call.attrs.getInt("axis", 0), int64_t(data->shape.size()));
  if (!axis)
    return axis.takeError();
  for (size_t d = 0; d < data->shape.size(); ++d)
    if (int(d) != *axis && indices->shape[d] > data->shape[d])
      return cudaKernelError("GatherElements: indices shape " + formatShape(indices->shape) +
                             " exceeds the data's " + formatShape(data->shape) + " on axis " +
                             Twine(d));
  auto outDims = dims8(call, out->shape), dataDims = dims8(call, data->shape);
  if (!outDims)
    return outDims.takeError();
  if (!dataDims)
    return dataDims.takeError();
  int64_t n = out->numElements();
  return dispatchBytes(dtypeSize(data->dtype), call.opType, [&](auto tag) -> Error {
    using U = decltype(tag);
    if (n == 0)
      return Error::success();
    if (indices->dtype == DType::I64)
      gatherElementsKernel<U, int64_t><<<blocksFor(n), kThreads, 0, call.stream>>>(
          static_cast<const U *>(data->data), static_cast<const int64_t *>(indices->data),
          static_cast<U *>(out->data), n, *outDims, *dataDims, *axis);
    else
      gatherElementsKernel<U, int32_t><<<blocksFor(n), kThreads, 0, call.stream>>>(
          static_cast<const U *>(data->data), static_cast<const int32_t *>(indices->data),
          static_cast<U *>(out->data), n, *outDims, *dataDims, *axis);
    return checkLaunch("gatherElementsKernel");
  });
}

Error runPad(const CudaKernelCall &call) {
  const DeviceTensor *in = call.input(0);
  DeviceTensor *out = call.output(0);
  if (!in || !out || (call.opsetVersion >= 11 && !call.input(1)))
    return cudaKernelError("Pad: expects data, pads and an output");
  if (in->dtype != out->dtype || in->shape.size() != out->shape.size())
    return cudaKernelError("Pad: output type or rank differs from the data's");
  auto v = padViewOf(call, in->shape, out->shape, 1, 3);
  if (!v)
    return v.takeError();
  size_t es = dtypeSize(in->dtype);
  // The constant's bytes: the scalar operand (host-readable, a Constant),
  // or the `value` attribute before opset 11.
  uint64_t constant = 0;
  if (const DeviceTensor *value = call.input(2)) {
    if (value->dtype != in->dtype || value->numElements() != 1)
      return cudaKernelError("Pad: constant_value must be a scalar of the data's type");
    auto readable = isHostReadable(value->data);
    if (!readable)
      return readable.takeError();
    if (!*readable)
      return cudaKernelError("unsupported: Pad with its constant_value in device memory on "
                             "the cuda backend");
    std::memcpy(&constant, value->data, es);
  } else if (call.opsetVersion < 11) {
    if (in->dtype != DType::F32)
      return cudaKernelError("unsupported: Pad's value attribute with " + dtypeName(in->dtype));
    float f = static_cast<float>(call.attrs.getFloat("value", 0));
    std::memcpy(&constant, &f, sizeof(f));
  }
  int64_t n = out->numElements();
  return dispatchBytes(es, call.opType, [&](auto tag) -> Error {
    using U = decltype(tag);
    if (n == 0)
      return Error::success();
    U c;
    std::memcpy(&c, &constant, sizeof(U));
    padKernel<U><<<blocksFor(n), kThreads, 0, call.stream>>>(
        static_cast<const U *>(in->data), static_cast<U *>(out->data), n, *v, c);
    return checkLaunch("padKernel");
  });
}

Error runPadGrad(const CudaKernelCall &call) {
  const DeviceTensor *dy = call.input(0), *pads = call.input(1);
  DeviceTensor *dx = call.output(0);
  if (!dy || !pads || !dx)
    return cudaKernelError("PadGrad: expects dy, pads and an output");
  if (dy->dtype != dx->dtype || dy->shape.size() != dx->shape.size())
    return cudaKernelError("PadGrad: dy and dx must share a type and rank");
  auto v = padViewOf(call, dx->shape, dy->shape, 1, 2);
  if (!v)
    return v.takeError();
  // Reflect, edge and wrap sum several outputs into one input element;
  // without atomics (the backend's sums are deterministic) that is a
  // gather over each element's sources, not written yet.
  if (v->mode != PadMode::Constant)
    return cudaKernelError("unsupported: PadGrad of mode '" +
                           call.attrs.getString("mode", "constant") +
                           "' on the cuda backend (constant only; the cpu backend has all)");
  int64_t n = dx->numElements();
  return dispatchBytes(dtypeSize(dx->dtype), call.opType, [&](auto tag) -> Error {
    using U = decltype(tag);
    if (n == 0)
      return Error::success();
    constantPadGradKernel<U><<<blocksFor(n), kThreads, 0, call.stream>>>(
        static_cast<const U *>(dy->data), static_cast<U *>(dx->data), n, *v);
    return checkLaunch("constantPadGradKernel");
  });
}

Error runHardSigmoid(const CudaKernelCall &call) {
  const DeviceTensor *x = call.input(0);
  DeviceTensor *y = call.output(0);
  if (!x || !y || x->dtype != y->dtype || x->numElements() != y->numElements())
    return cudaKernelError("HardSigmoid: expects an input and an output of its type and size");
  float alpha = static_cast<float>(call.attrs.getFloat("alpha", 0.2));
  float beta = static_cast<float>(call.attrs.getFloat("beta", 0.5));
  int64_t n = x->numElements();
  return dispatchFloat(x->dtype, call.opType, [&](auto tag) -> Error {
    using T = decltype(tag);
    if (n == 0)
      return Error::success();
    hardSigmoidKernel<T><<<blocksFor(n), kThreads, 0, call.stream>>>(
        static_cast<const T *>(x->data), static_cast<T *>(y->data), n, alpha, beta);
    return checkLaunch("hardSigmoidKernel");
  });
}

Error runHardSigmoidGrad(const CudaKernelCall &call) {
  const DeviceTensor *x = call.input(0), *dy = call.input(1);
  DeviceTensor *dx = call.output(0);
  if (!x || !dy || !dx || dy->dtype != x->dtype || dx->dtype != x->dtype ||
      dy->numElements() != x->numElements() || dx->numElements() != x->numElements())
    return cudaKernelError("HardSigmoidGrad: expects x, dy and dx of one type and size");
  float alpha = static_cast<float>(call.attrs.getFloat("alpha", 0.2));
  float beta = static_cast<float>(call.attrs.getFloat("beta", 0.5));
  int64_t n = x->numElements();
  return dispatchFloat(x->dtype, call.opType, [&](auto tag) -> Error {
    using T = decltype(tag);
    if (n == 0)
      return Error::success();
    hardSigmoidGradKernel<T><<<blocksFor(n), kThreads, 0, call.stream>>>(
        static_cast<const T *>(x->data), static_cast<const T *>(dy->data),
        static_cast<T *>(dx->data), n, alpha, beta);
    return checkLaunch("hardSigmoidGradKernel");
  });
}

} // namespace zinc::cuda
