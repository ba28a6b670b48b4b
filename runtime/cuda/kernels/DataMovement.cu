//===- DataMovement.cu - Reshape, Expand, Concat, Slice, Split on the GPU -===//
//
// The cuda counterparts of runtime/cpu/kernels/Shape.cpp's copyThrough and
// DataMovement.cpp's Slice, Expand, Concat and Split, and of SliceGrad.
// None looks at values: like the cpu kernels they move elements of
// dtypeSize() bytes, here as unsigned words, widened to up to 16 bytes
// where the innermost rows allow. Every op is a copy between a contiguous
// tensor and a strided view of another (Slice and Expand gather from a view
// of the input, Concat scatters each input into a view of the output, Split
// gathers each output from a view of the input, SliceGrad scatters dy into
// a view of zeroed dx), so one kernel does them all.
//
// Slice's starts/ends/axes/steps (and Split's split, Expand's shape) decide
// the geometry, which must be known on the host before anything is queued.
// The compiler keeps them constant (Constant nodes or initializers); the
// kernel reads them where they lie in host-readable memory (pinned,
// managed, or ordinary host memory under unified addressing) and refuses
// them in device memory, where reading would synchronise.
//
//===----------------------------------------------------------------------===//
#include "CudaKernels.h"
#include "SliceGeometry.h"
#include "WordTypes.cuh"
#include "zinc/runtime/cuda/CudaCheck.h"
#include "zinc/support/Error.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/Twine.h"
#include <algorithm>
#include <cstdint>

using llvm::ArrayRef;
using llvm::Error;
using llvm::SmallVector;
using llvm::StringRef;
using llvm::Twine;

namespace zinc::cuda {

using Dims = SmallVector<int64_t, 6>;

namespace {

constexpr unsigned kThreads = 256;
/// Dimensions of a view after merging; more needs a deeper odometer.
constexpr int kMaxViewRank = 8;

/// A strided view passed by value: dims outermost first and the element
/// stride of each (0 broadcasts, negative walks backwards).
struct ViewParams {
  int rank;
  int64_t dims[kMaxViewRank];
  int64_t strides[kMaxViewRank];
};

/// The view offset of contiguous element `e`.
__device__ __forceinline__ int64_t viewOffset(const ViewParams &p, int64_t e) {
  int64_t off = 0;
  // Unrolled with constant indices so the parameters are read in place; a
  // loop to p.rank would copy the struct to local memory to index it.
#pragma unroll
  for (int d = kMaxViewRank - 1; d > 0; --d) {
    if (d < p.rank) {
      int64_t idx = e % p.dims[d];
      e /= p.dims[d];
      off += idx * p.strides[d];
    }
  }
  return off + e * p.strides[0];
}

/// Gather: dst[e] = view[e]; scatter: view[e] = src[e], for `total`
/// elements of E. `view` points at the view's first element.
template <typename E, bool Scatter>
__global__ void __launch_bounds__(kThreads)
    viewCopyKernel(const E *src, E *dst, int64_t total, ViewParams p) {
  int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += stride) {
    int64_t off = viewOffset(p, e);
    if constexpr (Scatter)
      dst[off] = src[e];
    else
      dst[e] = src[off];
  }
}

} // namespace

//===----------------------------------------------------------------------===//
// Host side: views
//===----------------------------------------------------------------------===//

/// Drops size-1 dimensions and merges neighbours that the view walks as
/// one (outer stride == inner stride * inner size), as the cpu's
/// simplifyView does.
static void simplifyView(Dims &shape, Dims &strides) {
  Dims s, t;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1)
      continue;
    if (!s.empty() && t.back() == strides[d] * shape[d]) {
      s.back() *= shape[d];
      t.back() = strides[d];
      continue;
    }
    s.push_back(shape[d]);
    t.push_back(strides[d]);
  }
  shape = std::move(s);
  strides = std::move(t);
}

/// The widest word (16, 8, 4 or 2 bytes, at least `elemSize`) that moves
/// whole pieces of the innermost rows: they must be contiguous, and the
/// rows, the outer strides and both pointers multiples of it.
static size_t widestWord(size_t elemSize, ArrayRef<int64_t> shape,
                         ArrayRef<int64_t> strides, const void *contig,
                         const void *view) {
  if (shape.empty() || strides.back() != 1)
    return elemSize;
  for (size_t w = 16; w > elemSize; w /= 2) {
    auto fits = [&](int64_t elems) {
      return (elems * static_cast<int64_t>(elemSize)) % static_cast<int64_t>(w) ==
             0;
    };
    bool ok = fits(shape.back()) &&
              reinterpret_cast<uintptr_t>(contig) % w == 0 &&
              reinterpret_cast<uintptr_t>(view) % w == 0;
    for (size_t d = 0; ok && d + 1 < strides.size(); ++d)
      ok = fits(strides[d]);
    if (ok)
      return w;
  }
  return elemSize;
}

/// Copies between the contiguous `contig` and the view of `viewBase` with
/// `shape` and element `strides` starting `base` elements in: gathers the
/// view into contig, or with `scatter` writes contig into the view.
static Error copyView(const CudaKernelCall &call, void *contig, void *viewBase,
                      size_t elemSize, ArrayRef<int64_t> shapeIn,
                      ArrayRef<int64_t> stridesIn, int64_t base, bool scatter) {
  int64_t total = numElements(shapeIn);
  if (total == 0)
    return Error::success();
  Dims shape(shapeIn.begin(), shapeIn.end());
  Dims strides(stridesIn.begin(), stridesIn.end());
  simplifyView(shape, strides);
  char *view = static_cast<char *>(viewBase) + base * int64_t(elemSize);
  // One contiguous run (or one element): a plain copy.
  if (shape.empty() || (shape.size() == 1 && strides[0] == 1)) {
    void *dst = scatter ? view : contig;
    const void *src = scatter ? contig : view;
    if (dst != src)
      ZINC_CUDA_TRY(cudaMemcpyAsync(dst, src, total * elemSize,
                                    cudaMemcpyDeviceToDevice, call.stream));
    return Error::success();
  }
  if (shape.size() > size_t(kMaxViewRank))
    return cudaKernelError("unsupported: " + call.opType +
                           " of a view that needs " + Twine(shape.size()) +
                           " dimensions after merging, more than " +
                           Twine(kMaxViewRank));
  size_t word = widestWord(elemSize, shape, strides, contig, view);
  if (word != elemSize) {
    int64_t ratio = int64_t(word / elemSize);
    for (size_t d = 0; d + 1 < strides.size(); ++d)
      strides[d] /= ratio;
    shape.back() /= ratio;
    total /= ratio;
  }
  ViewParams p{};
  p.rank = static_cast<int>(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    p.dims[d] = shape[d];
    p.strides[d] = strides[d];
  }
  auto launch = [&](auto tag) -> Error {
    using E = decltype(tag);
    unsigned grid = gridFor(total, kThreads);
    if (scatter)
      viewCopyKernel<E, true><<<grid, kThreads, 0, call.stream>>>(
          static_cast<const E *>(contig), reinterpret_cast<E *>(view), total,
          p);
    else
      viewCopyKernel<E, false><<<grid, kThreads, 0, call.stream>>>(
          reinterpret_cast<const E *>(view), static_cast<E *>(contig), total,
          p);
    return checkLaunch(call.opType + " (viewCopyKernel, " + Twine(word) +
                       "-byte words)");
  };
  return withWordType(static_cast<int64_t>(word), launch);
}

/// Row-major strides of `shape`, in elements.
static Dims contiguousStrides(ArrayRef<int64_t> shape) {
  Dims s(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;)
    s[d - 1] = s[d] * shape[d];
  return s;
}

static Error normalizeAxis(const CudaKernelCall &call, int64_t &axis,
                           int64_t rank) {
  if (axis < -rank || axis >= rank)
    return cudaKernelError(call.opType + ": axis " + Twine(axis) +
                           " is out of range for rank " + Twine(rank));
  if (axis < 0)
    axis += rank;
  return Error::success();
}

//===----------------------------------------------------------------------===//
// Host-readable operands
//===----------------------------------------------------------------------===//

llvm::Expected<bool> isHostReadable(const void *p) {
  cudaPointerAttributes attrs;
  cudaError_t status = cudaPointerGetAttributes(&attrs, p);
  if (status != cudaSuccess)
    return checkCuda(status, "cudaPointerGetAttributes");
  // Under unified addressing a pinned or managed pointer is the same on
  // the host, and an unregistered one is plain host memory.
  return attrs.type != cudaMemoryTypeDevice;
}

/// The values of a small i32/i64 operand, read on the host.
static llvm::Expected<Dims> readHostIndexList(const CudaKernelCall &call,
                                              const DeviceTensor &t,
                                              StringRef what) {
  if (t.dtype != DType::I64 && t.dtype != DType::I32)
    return cudaKernelError(call.opType + ": " + what + " must be i32 or i64, not " +
                           dtypeName(t.dtype));
  int64_t n = t.numElements();
  if (n == 0)
    return Dims();
  auto readable = isHostReadable(t.data);
  if (!readable)
    return readable.takeError();
  if (!*readable)
    return cudaKernelError(
        "unsupported: " + call.opType + " with its " + what +
        " in device memory on the cuda backend (reading it would synchronise; "
        "the executor must keep it in host memory)");
  Dims v(n);
  for (int64_t i = 0; i < n; ++i)
    v[i] = t.dtype == DType::I64 ? static_cast<const int64_t *>(t.data)[i]
                                 : static_cast<const int32_t *>(t.data)[i];
  return v;
}

//===----------------------------------------------------------------------===//
// Reshape and friends
//===----------------------------------------------------------------------===//

static Error requireIO(const CudaKernelCall &call, size_t numInputs) {
  for (size_t i = 0; i < numInputs; ++i)
    if (!call.input(i))
      return cudaKernelError(call.opType + ": input " + Twine(i) +
                             " is missing");
  if (!call.output(0))
    return cudaKernelError(call.opType + ": output 0 is missing");
  if (call.input(0)->dtype != call.output(0)->dtype)
    return cudaKernelError(call.opType + ": input has type " +
                           dtypeName(call.input(0)->dtype) +
                           " but output has type " +
                           dtypeName(call.output(0)->dtype));
  return Error::success();
}

static Error checkOutputShape(const CudaKernelCall &call,
                              const DeviceTensor &out,
                              ArrayRef<int64_t> expected) {
  if (ArrayRef<int64_t>(out.shape) == expected)
    return Error::success();
  return cudaKernelError(call.opType + ": output shape " +
                         formatShape(out.shape) + " differs from the expected " +
                         formatShape(expected));
}

Error runReshapeLike(const CudaKernelCall &call) {
  if (Error e = requireIO(call, 1))
    return e;
  const DeviceTensor &in = *call.input(0);
  DeviceTensor &out = *call.output(0);
  if (in.numElements() != out.numElements())
    return cudaKernelError(call.opType + ": input shape " +
                           formatShape(in.shape) + " and output shape " +
                           formatShape(out.shape) +
                           " have different element counts");
  // Nothing moves when the plan gave the output the input's bytes.
  if (in.byteSize() != 0 && out.data != in.data)
    ZINC_CUDA_TRY(cudaMemcpyAsync(out.data, in.data, in.byteSize(),
                                  cudaMemcpyDeviceToDevice, call.stream));
  return Error::success();
}

//===----------------------------------------------------------------------===//
// Slice, Expand, SliceGrad
//===----------------------------------------------------------------------===//

/// Slice's (or SliceGrad's) list operand `input`, or attribute `name`
/// before opset 10 for Slice; empty when absent.
static llvm::Expected<Dims> sliceList(const CudaKernelCall &call,
                                      StringRef name, size_t input,
                                      bool fromAttrs) {
  if (fromAttrs) {
    ArrayRef<int64_t> v = call.attrs.getInts(name);
    return Dims(v.begin(), v.end());
  }
  if (const DeviceTensor *t = call.input(input))
    return readHostIndexList(call, *t, name);
  return Dims();
}

/// The view Slice selects of `shape`, from its four lists.
static llvm::Expected<cpu::SliceView>
sliceViewOf(const CudaKernelCall &call, ArrayRef<int64_t> shape,
            bool fromAttrs) {
  static const char *const names[] = {"starts", "ends", "axes", "steps"};
  Dims lists[4];
  for (size_t i = 0; i < 4; ++i) {
    auto l = sliceList(call, names[i], i + 1, fromAttrs);
    if (!l)
      return l.takeError();
    lists[i] = std::move(*l);
  }
  return cpu::computeSliceView(call.opType, shape, lists[0], lists[1],
                               lists[2], lists[3]);
}

Error runSlice(const CudaKernelCall &call) {
  bool fromAttrs = call.opsetVersion < 10;
  if (Error e = requireIO(call, fromAttrs ? 1 : 3))
    return e;
  const DeviceTensor &in = *call.input(0);
  DeviceTensor &out = *call.output(0);
  auto view = sliceViewOf(call, in.shape, fromAttrs);
  if (!view)
    return view.takeError();
  if (Error e = checkOutputShape(call, out, view->shape))
    return e;
  return copyView(call, out.data, in.data, dtypeSize(in.dtype), view->shape,
                  view->strides, view->base, /*scatter=*/false);
}

Error runSliceGrad(const CudaKernelCall &call) {
  const DeviceTensor *dy = call.input(0);
  DeviceTensor *dx = call.output(0);
  if (!dy || !call.input(1) || !call.input(2) || !dx)
    return cudaKernelError("SliceGrad: expects inputs (dy, starts, ends) and "
                           "output dx");
  if (!isFloatDType(dy->dtype))
    return cudaKernelError("unsupported: SliceGrad with element type " +
                           dtypeName(dy->dtype));
  if (dy->dtype != dx->dtype)
    return cudaKernelError("SliceGrad: element types " + dtypeName(dy->dtype) +
                           " and " + dtypeName(dx->dtype) + " differ");
  ArrayRef<int64_t> shape = call.attrs.getInts("shape");
  if (ArrayRef<int64_t>(dx->shape) != shape)
    return cudaKernelError("SliceGrad: dx has shape " + formatShape(dx->shape) +
                           ", expected " + formatShape(shape));
  auto view = sliceViewOf(call, dx->shape, /*fromAttrs=*/false);
  if (!view)
    return view.takeError();
  if (ArrayRef<int64_t>(dy->shape) != ArrayRef<int64_t>(view->shape))
    return cudaKernelError("SliceGrad: dy has shape " + formatShape(dy->shape) +
                           ", expected " + formatShape(view->shape));
  // All-zero bytes are the zero of every float type.
  if (dx->byteSize() != 0)
    ZINC_CUDA_TRY(cudaMemsetAsync(dx->data, 0, dx->byteSize(), call.stream));
  return copyView(call, dy->data, dx->data, dtypeSize(dy->dtype), view->shape,
                  view->strides, view->base, /*scatter=*/true);
}

/// Numpy broadcast of two shapes, or an error naming the op.
static llvm::Expected<Dims> broadcastShapes(const CudaKernelCall &call,
                                            ArrayRef<int64_t> a,
                                            ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  Dims out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return cudaKernelError(call.opType + ": shapes " + formatShape(a) +
                             " and " + formatShape(b) + " do not broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Error runExpand(const CudaKernelCall &call) {
  if (Error e = requireIO(call, 1))
    return e;
  const DeviceTensor &in = *call.input(0);
  DeviceTensor &out = *call.output(0);
  int64_t inRank = static_cast<int64_t>(in.shape.size());
  int64_t outRank = static_cast<int64_t>(out.shape.size());
  bool ok = inRank <= outRank;
  for (int64_t d = 0; ok && d < inRank; ++d) {
    int64_t o = out.shape[outRank - inRank + d];
    ok = in.shape[d] == o || in.shape[d] == 1;
  }
  if (!ok)
    return cudaKernelError("Expand: input shape " + formatShape(in.shape) +
                           " does not broadcast to output shape " +
                           formatShape(out.shape));
  // The shape operand only confirms what the plan fixed: it is checked
  // where the host can read it, and otherwise not needed.
  if (const DeviceTensor *s = call.input(1)) {
    auto readable = isHostReadable(s->data);
    if (!readable)
      return readable.takeError();
    if (*readable && s->numElements() != 0) {
      auto dims = readHostIndexList(call, *s, "shape");
      if (!dims)
        return dims.takeError();
      auto expected = broadcastShapes(call, in.shape, *dims);
      if (!expected)
        return expected.takeError();
      if (Error e = checkOutputShape(call, out, *expected))
        return e;
    }
  }
  // Read the input at the output's indices: stride 0 along broadcast
  // dimensions, the input right-aligned against the output.
  Dims inStrides = contiguousStrides(in.shape), strides(outRank, 0);
  for (int64_t d = 0; d < inRank; ++d)
    if (in.shape[d] != 1)
      strides[outRank - inRank + d] = inStrides[d];
  return copyView(call, out.data, in.data, dtypeSize(in.dtype), out.shape,
                  strides, 0, /*scatter=*/false);
}

//===----------------------------------------------------------------------===//
// Concat and Split
//===----------------------------------------------------------------------===//

/// Moves part `partData` ([outer, partCols] elements) to or from columns
/// [column, column + partCols) of the whole [outer, wholeCols].
static Error movePart(const CudaKernelCall &call, void *whole, void *partData,
                      size_t elemSize, int64_t outer, int64_t wholeCols,
                      int64_t column, int64_t partCols, bool toWhole) {
  int64_t shape[] = {outer, partCols};
  int64_t strides[] = {wholeCols, 1};
  return copyView(call, partData, whole, elemSize, shape, strides, column,
                  /*scatter=*/toWhole);
}

Error runConcat(const CudaKernelCall &call) {
  if (Error e = requireIO(call, 1))
    return e;
  DeviceTensor &out = *call.output(0);
  int64_t rank = static_cast<int64_t>(out.shape.size());
  if (rank == 0)
    return cudaKernelError("Concat: scalars cannot be concatenated");
  int64_t axis = call.attrs.getInt("axis", 0);
  if (Error e = normalizeAxis(call, axis, rank))
    return e;
  int64_t inner = numElements(ArrayRef<int64_t>(out.shape).drop_front(axis + 1));
  int64_t total = 0;
  for (size_t i = 0; i < call.inputs.size(); ++i) {
    const DeviceTensor *in = call.input(i);
    if (!in)
      return cudaKernelError("Concat: input " + Twine(i) + " is missing");
    bool ok = in->dtype == out.dtype &&
              static_cast<int64_t>(in->shape.size()) == rank;
    for (int64_t d = 0; ok && d < rank; ++d)
      ok = d == axis || in->shape[d] == out.shape[d];
    if (!ok)
      return cudaKernelError("Concat: input " + Twine(i) + " (" +
                             dtypeName(in->dtype) + formatShape(in->shape) +
                             ") does not fit output " + dtypeName(out.dtype) +
                             formatShape(out.shape) + " along axis " +
                             Twine(axis));
    total += in->shape[axis];
  }
  if (total != out.shape[axis])
    return cudaKernelError("Concat: inputs add up to " + Twine(total) +
                           " along axis " + Twine(axis) + ", output has " +
                           Twine(out.shape[axis]));
  int64_t outer = numElements(ArrayRef<int64_t>(out.shape).take_front(axis));
  int64_t wholeCols = out.shape[axis] * inner, column = 0;
  for (const DeviceTensor *in : call.inputs) {
    int64_t cols = in->shape[axis] * inner;
    if (Error e = movePart(call, out.data, in->data, dtypeSize(out.dtype),
                           outer, wholeCols, column, cols, /*toWhole=*/true))
      return e;
    column += cols;
  }
  return Error::success();
}

/// Split's sizes along its axis, as the cpu's splitSizes finds them for
/// the model's opset; a split operand in device memory is replaced by the
/// outputs' own sizes, which the plan fixed from it.
static llvm::Expected<Dims> splitSizes(const CudaKernelCall &call,
                                       int64_t axis, int64_t dim) {
  size_t numOut = call.outputs.size();
  Dims sizes;
  if (call.opsetVersion >= 13) {
    if (const DeviceTensor *s = call.input(1)) {
      auto readable = isHostReadable(s->data);
      if (!readable)
        return readable.takeError();
      if (*readable || s->numElements() == 0) {
        auto list = readHostIndexList(call, *s, "split");
        if (!list)
          return list.takeError();
        sizes = std::move(*list);
      } else {
        for (size_t i = 0; i < numOut; ++i) {
          const DeviceTensor *out = call.output(i);
          if (!out || static_cast<int64_t>(out->shape.size()) <= axis)
            return cudaKernelError(
                "unsupported: Split with its split sizes in device memory "
                "and output " +
                Twine(i) + " absent or of the wrong rank");
          sizes.push_back(out->shape[axis]);
        }
      }
    }
  } else {
    ArrayRef<int64_t> s = call.attrs.getInts("split");
    sizes.assign(s.begin(), s.end());
  }
  if (!sizes.empty()) {
    int64_t sum = 0;
    for (int64_t s : sizes) {
      if (s < 0)
        return cudaKernelError("Split: split size " + Twine(s) +
                               " is negative");
      sum += s;
    }
    if (sizes.size() != numOut || sum != dim)
      return cudaKernelError("Split: split sizes add up to " + Twine(sum) +
                             " in " + Twine(sizes.size()) +
                             " parts, but axis has " + Twine(dim) +
                             " and there are " + Twine(numOut) + " outputs");
    return sizes;
  }
  if (numOut == 0)
    return cudaKernelError("Split: no outputs");
  int64_t n = static_cast<int64_t>(numOut);
  if (call.attrs.has("num_outputs")) {
    // Opset 18: equal parts of ceil(dim / n), the last one smaller.
    int64_t part = (dim + n - 1) / n;
    for (int64_t i = 0; i < n; ++i)
      sizes.push_back(std::clamp<int64_t>(dim - i * part, 0, part));
    return sizes;
  }
  if (dim % n != 0)
    return cudaKernelError("Split: axis of size " + Twine(dim) +
                           " does not split into " + Twine(n) +
                           " equal parts");
  sizes.assign(numOut, dim / n);
  return sizes;
}

Error runSplit(const CudaKernelCall &call) {
  const DeviceTensor *in = call.input(0);
  if (!in)
    return cudaKernelError("Split: input 0 is missing");
  int64_t rank = static_cast<int64_t>(in->shape.size());
  if (rank == 0)
    return cudaKernelError("Split: a scalar cannot be split");
  int64_t axis = call.attrs.getInt("axis", 0);
  if (Error e = normalizeAxis(call, axis, rank))
    return e;
  auto sizes = splitSizes(call, axis, in->shape[axis]);
  if (!sizes)
    return sizes.takeError();
  for (size_t i = 0; i < call.outputs.size(); ++i) {
    const DeviceTensor *out = call.output(i);
    if (!out)
      continue;
    Dims expected(in->shape.begin(), in->shape.end());
    expected[axis] = (*sizes)[i];
    if (out->dtype != in->dtype)
      return cudaKernelError("Split: output " + Twine(i) + " has type " +
                             dtypeName(out->dtype) + ", input has " +
                             dtypeName(in->dtype));
    if (ArrayRef<int64_t>(out->shape) != ArrayRef<int64_t>(expected))
      return cudaKernelError("Split: output " + Twine(i) + " has shape " +
                             formatShape(out->shape) + ", expected " +
                             formatShape(expected));
  }
  int64_t inner = numElements(ArrayRef<int64_t>(in->shape).drop_front(axis + 1));
  int64_t outer = numElements(ArrayRef<int64_t>(in->shape).take_front(axis));
  int64_t wholeCols = in->shape[axis] * inner, column = 0;
  for (size_t i = 0; i < call.outputs.size(); ++i) {
    int64_t cols = (*sizes)[i] * inner;
    // An absent output is skipped but still takes its place.
    if (DeviceTensor *out = call.output(i))
      if (Error e = movePart(call, in->data, out->data, dtypeSize(in->dtype),
                             outer, wholeCols, column, cols, /*toWhole=*/false))
        return e;
    column += cols;
  }
  return Error::success();
}

} // namespace zinc::cuda
