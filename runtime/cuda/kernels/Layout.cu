//===- Layout.cu - Transpose, Gather and GatherGrad kernels ---------------===//
//
// Transpose and Gather move elements without looking at them, so they are
// instantiated per element size (1, 2, 4, 8 bytes, and 16-byte units where
// whole rows move), not per dtype. A transpose is the strided view of
// LayoutMath.h; one that swaps the two innermost (merged) dimensions goes
// through 32x32 shared-memory tiles so that both its reads and writes are
// whole rows.
//
// GatherGrad is a scatter-add, done without sorting and without atomics:
// one warp per gathered row of dx (and 256 of its columns) scans the
// indices 32 at a time with a ballot and adds the matching rows of dy in
// position order, in float, rounding once. The result is deterministic and
// needs no scratch; the price is that every warp reads every index, which
// is cheap next to the rows for the token batches of a language model.
//
// Indices live on the device, so one out of range cannot be reported
// without a synchronisation: Gather writes zeros for it and GatherGrad
// drops it, where the cpu kernels return an error.
//
//===----------------------------------------------------------------------===//
#include "CudaKernels.h"
#include "DeviceTypes.cuh"
#include "LayoutMath.h"
#include "zinc/runtime/cuda/CudaCheck.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/Twine.h"
#include <algorithm>
#include <cstdint>

namespace zinc::cuda {
namespace {

using llvm::ArrayRef;
using llvm::Error;
using llvm::SmallVector;
using llvm::Twine;

using Dims = SmallVector<int64_t, 6>;

constexpr unsigned kThreads = 256;
/// Transpose tiles: 32x32 elements, moved by 32x8 threads.
constexpr int kTile = 32;
constexpr int kTileRows = 8;
/// Columns of dx one GatherGrad warp accumulates: 8 per lane.
constexpr int kLaneColumns = 8;
constexpr int kWarpColumns = 32 * kLaneColumns;

/// 16 bytes moved as one load and store.
struct alignas(16) Unit16 {
  uint32_t v[4];
};

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

/// dst[e] = src[view(e)] for every row-major index e of the view.
template <typename U>
__global__ void __launch_bounds__(kThreads)
    stridedCopyKernel(const U *__restrict__ src, U *__restrict__ dst,
                      int64_t n, StridedView view) {
  int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += step)
    dst[e] = src[stridedOffset(view, e)];
}

/// out[b, r, c] = in[batch(b) + c * rows + r]: a batch of [cols, rows]
/// matrices transposed through shared-memory tiles. Block (32, 8); grid.x
/// tiles rows, grid.y (stride loop) tiles columns, grid.z (stride loop)
/// walks the batch, whose offsets `batch` gives.
template <typename U>
__global__ void tiledTransposeKernel(const U *__restrict__ src,
                                     U *__restrict__ dst, int64_t batches,
                                     int64_t rows, int64_t cols,
                                     StridedView batch) {
  __shared__ U tile[kTile][kTile + 1];
  int tx = threadIdx.x, ty = threadIdx.y;
  int64_t r0 = int64_t(blockIdx.x) * kTile;
  for (int64_t b = blockIdx.z; b < batches; b += gridDim.z) {
    const U *in = src + stridedOffset(batch, b);
    U *out = dst + b * rows * cols;
    for (int64_t c0 = int64_t(blockIdx.y) * kTile; c0 < cols;
         c0 += int64_t(gridDim.y) * kTile) {
      for (int k = ty; k < kTile; k += kTileRows) {
        int64_t r = r0 + tx, c = c0 + k;
        if (r < rows && c < cols)
          tile[k][tx] = in[c * rows + r];
      }
      __syncthreads();
      for (int k = ty; k < kTile; k += kTileRows) {
        int64_t r = r0 + k, c = c0 + tx;
        if (r < rows && c < cols)
          out[r * cols + c] = tile[tx][k];
      }
      __syncthreads();
    }
  }
}

/// Gather over data [outer, dim, inner] (in units) by `count` indices.
template <typename U, typename I>
__global__ void __launch_bounds__(kThreads)
    gatherKernel(const U *__restrict__ data, const I *__restrict__ indices,
                 U *__restrict__ out, int64_t total, int64_t count,
                 int64_t dim, int64_t inner) {
  int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += step) {
    int64_t j = (e / inner) % count;
    int64_t row = wrapIndex(static_cast<int64_t>(indices[j]), dim);
    out[e] = row < 0 ? U{} : data[gatherSourceOffset(e, count, dim, inner, row)];
  }
}

/// dx[o, row, c] = sum over positions p with idx[p] == row of dy[o, p, c]:
/// one warp per (o, row, 256 columns), positions in order.
template <typename T, typename I>
__global__ void __launch_bounds__(kThreads)
    gatherGradKernel(const I *__restrict__ indices, const T *__restrict__ dy,
                     T *__restrict__ dx, int64_t outer, int64_t dim,
                     int64_t inner, int64_t count) {
  int lane = threadIdx.x % 32;
  int64_t chunks = (inner + kWarpColumns - 1) / kWarpColumns;
  int64_t tasks = outer * dim * chunks;
  int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  for (int64_t t = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
       t < tasks; t += warps) {
    int64_t chunk = t % chunks, rowTask = t / chunks;
    int64_t row = rowTask % dim, o = rowTask / dim;
    int64_t c0 = chunk * kWarpColumns + lane;
    float acc[kLaneColumns];
#pragma unroll
    for (int v = 0; v < kLaneColumns; ++v)
      acc[v] = 0.0f;
    for (int64_t p0 = 0; p0 < count; p0 += 32) {
      int64_t p = p0 + lane;
      bool match = p < count &&
                   wrapIndex(static_cast<int64_t>(indices[p]), dim) == row;
      unsigned mask = __ballot_sync(0xffffffffu, match);
      while (mask) {
        int b = __ffs(mask) - 1;
        mask &= mask - 1;
        const T *src = dy + (o * count + p0 + b) * inner;
#pragma unroll
        for (int v = 0; v < kLaneColumns; ++v) {
          int64_t c = c0 + 32 * v;
          if (c < inner)
            acc[v] += loadF(src[c]);
        }
      }
    }
    T *dst = dx + (o * dim + row) * inner;
#pragma unroll
    for (int v = 0; v < kLaneColumns; ++v) {
      int64_t c = c0 + 32 * v;
      if (c < inner)
        dst[c] = storeF<T>(acc[v]);
    }
  }
}

//===----------------------------------------------------------------------===//
// Host helpers
//===----------------------------------------------------------------------===//

/// Calls fn(U{}) with U an unsigned type of `bytes` (1, 2, 4, 8, 16).
template <typename Fn> Error visitUnit(int bytes, Fn &&fn) {
  switch (bytes) {
  case 1:
    return fn(uint8_t{});
  case 2:
    return fn(uint16_t{});
  case 4:
    return fn(uint32_t{});
  case 8:
    return fn(uint64_t{});
  case 16:
    return fn(Unit16{});
  default:
    return cudaKernelError("unsupported: an element of " + Twine(bytes) +
                           " bytes on the cuda backend");
  }
}

Error requireIO(const CudaKernelCall &call, size_t numInputs) {
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

Error checkOutputShape(const CudaKernelCall &call, const DeviceTensor &out,
                       ArrayRef<int64_t> expected) {
  if (ArrayRef<int64_t>(out.shape) == expected)
    return Error::success();
  return cudaKernelError(call.opType + ": output shape " +
                         formatShape(out.shape) + " differs from the expected " +
                         formatShape(expected));
}

llvm::Expected<int64_t> normalizeAxis(int64_t axis, int64_t rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= std::max<int64_t>(rank, 1))
    return cudaKernelError("axis " + Twine(axis) + " is out of range for rank " +
                           Twine(rank));
  return a;
}

Error indicesTypeError(const CudaKernelCall &call, DType t) {
  return cudaKernelError("unsupported: " + call.opType + " with indices of " +
                         dtypeName(t) + " on the cuda backend (i32, i64)");
}

/// The widest unit (16, 8 or 4 bytes, at least `elemBytes`) that divides a
/// row of `rowBytes` and both addresses.
int rowUnit(int elemBytes, int64_t rowBytes, const void *a, const void *b) {
  for (int unit : {16, 8, 4})
    if (unit > elemBytes && rowBytes % unit == 0 &&
        reinterpret_cast<uintptr_t>(a) % unit == 0 &&
        reinterpret_cast<uintptr_t>(b) % unit == 0)
      return unit;
  return elemBytes;
}

/// Launches the transpose of `view` (a plan of planTranspose) of elements
/// of `elemBytes`, from src to dst.
Error launchTranspose(StridedView view, int elemBytes, const void *src,
                      void *dst, int64_t n, cudaStream_t stream) {
  if (isIdentityView(view)) {
    ZINC_CUDA_TRY(cudaMemcpyAsync(dst, src, n * elemBytes,
                                  cudaMemcpyDeviceToDevice, stream));
    return Error::success();
  }
  int64_t rows = isBatchedTranspose(view) ? view.dims[view.rank - 2] : 0;
  int64_t cols = rows ? view.dims[view.rank - 1] : 0;
  if (rows >= kTile / 2 && cols >= kTile / 2) {
    StridedView batch = view;
    batch.rank = view.rank - 2;
    int64_t batches = n / (rows * cols);
    return visitUnit(elemBytes, [&](auto tag) -> Error {
      using U = decltype(tag);
      dim3 grid(static_cast<unsigned>((rows + kTile - 1) / kTile),
                static_cast<unsigned>(
                    std::min<int64_t>((cols + kTile - 1) / kTile, 65535)),
                static_cast<unsigned>(std::min<int64_t>(batches, 65535)));
      tiledTransposeKernel<U><<<grid, dim3(kTile, kTileRows), 0, stream>>>(
          static_cast<const U *>(src), static_cast<U *>(dst), batches, rows,
          cols, batch);
      return checkLaunch("tiledTransposeKernel");
    });
  }
  int unit = widenView(view, elemBytes, reinterpret_cast<uintptr_t>(src),
                       reinterpret_cast<uintptr_t>(dst));
  int64_t units = n * elemBytes / unit;
  return visitUnit(unit, [&](auto tag) -> Error {
    using U = decltype(tag);
    stridedCopyKernel<U><<<gridFor(units, kThreads), kThreads, 0, stream>>>(
        static_cast<const U *>(src), static_cast<U *>(dst), units, view);
    return checkLaunch("stridedCopyKernel");
  });
}

} // namespace

//===----------------------------------------------------------------------===//
// Transpose
//===----------------------------------------------------------------------===//

Error runTranspose(const CudaKernelCall &call) {
  if (Error e = requireIO(call, 1))
    return e;
  const DeviceTensor &in = *call.input(0);
  DeviceTensor &out = *call.output(0);
  int64_t rank = static_cast<int64_t>(in.shape.size());
  Dims perm;
  if (call.attrs.has("perm")) {
    ArrayRef<int64_t> p = call.attrs.getInts("perm");
    perm.assign(p.begin(), p.end());
  } else {
    for (int64_t d = rank; d-- > 0;)
      perm.push_back(d);
  }
  if (static_cast<int64_t>(perm.size()) != rank)
    return cudaKernelError("Transpose: perm has " + Twine(perm.size()) +
                           " entries for an input of rank " + Twine(rank));
  SmallVector<bool, 6> seen(rank, false);
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || seen[p])
      return cudaKernelError("Transpose: perm is not a permutation of 0.." +
                             Twine(rank - 1));
    seen[p] = true;
  }
  Dims shape;
  for (int64_t p : perm)
    shape.push_back(in.shape[p]);
  if (Error e = checkOutputShape(call, out, shape))
    return e;
  int64_t n = in.numElements();
  if (n == 0)
    return Error::success();
  StridedView view;
  if (!planTranspose(in.shape, perm, view))
    return cudaKernelError("unsupported: Transpose of " +
                           formatShape(in.shape) + " on the cuda backend: " +
                           "more than " + Twine(kMaxViewRank) +
                           " dimensions after merging");
  return launchTranspose(view, static_cast<int>(dtypeSize(in.dtype)), in.data,
                         out.data, n, call.stream);
}

//===----------------------------------------------------------------------===//
// Gather
//===----------------------------------------------------------------------===//

Error runGather(const CudaKernelCall &call) {
  if (Error e = requireIO(call, 2))
    return e;
  const DeviceTensor &data = *call.input(0);
  const DeviceTensor &indices = *call.input(1);
  DeviceTensor &out = *call.output(0);
  int64_t rank = static_cast<int64_t>(data.shape.size());
  auto axisOr = normalizeAxis(call.attrs.getInt("axis", 0), rank);
  if (!axisOr)
    return axisOr.takeError();
  int64_t axis = *axisOr;
  if (rank == 0)
    return cudaKernelError("Gather: data must have rank >= 1");
  Dims shape(data.shape.begin(), data.shape.begin() + axis);
  shape.append(indices.shape.begin(), indices.shape.end());
  shape.append(data.shape.begin() + axis + 1, data.shape.end());
  if (Error e = checkOutputShape(call, out, shape))
    return e;
  if (indices.dtype != DType::I64 && indices.dtype != DType::I32)
    return indicesTypeError(call, indices.dtype);
  ArrayRef<int64_t> dataShape = data.shape;
  int64_t dim = dataShape[axis];
  int64_t count = indices.numElements();
  int64_t inner = numElements(dataShape.drop_front(axis + 1));
  int elemBytes = static_cast<int>(dtypeSize(data.dtype));
  int64_t total = out.numElements();
  if (total == 0)
    return Error::success();
  int unit = rowUnit(elemBytes, inner * elemBytes, data.data, out.data);
  int64_t innerUnits = inner * elemBytes / unit;
  int64_t units = total * elemBytes / unit;
  return visitUnit(unit, [&](auto tag) -> Error {
    using U = decltype(tag);
    auto launch = [&](auto indexTag) -> Error {
      using I = decltype(indexTag);
      gatherKernel<U, I>
          <<<gridFor(units, kThreads), kThreads, 0, call.stream>>>(
              static_cast<const U *>(data.data),
              static_cast<const I *>(indices.data),
              static_cast<U *>(out.data), units, count, dim, innerUnits);
      return checkLaunch("gatherKernel");
    };
    return indices.dtype == DType::I64 ? launch(int64_t{}) : launch(int32_t{});
  });
}

//===----------------------------------------------------------------------===//
// GatherGrad(indices, dy) -> dx, attributes axis, shape
//===----------------------------------------------------------------------===//

Error runGatherGrad(const CudaKernelCall &call) {
  const DeviceTensor *indices = call.input(0), *dy = call.input(1);
  DeviceTensor *dx = call.output(0);
  if (!indices || !dy || !dx)
    return cudaKernelError(
        "GatherGrad: expects inputs (indices, dy) and output dx");
  if (!isFloatDType(dy->dtype))
    return cudaKernelError("unsupported: " + call.opType +
                           " with element type " + dtypeName(dy->dtype));
  if (dy->dtype != dx->dtype)
    return cudaKernelError(call.opType + ": element types " +
                           dtypeName(dy->dtype) + " and " +
                           dtypeName(dx->dtype) + " differ");
  if (!isIntegerDType(indices->dtype))
    return cudaKernelError(Twine("GatherGrad: indices have element type ") +
                           dtypeName(indices->dtype) + ", expected an integer");
  auto requireShape = [&](const char *what, const DeviceTensor &t,
                          ArrayRef<int64_t> expected) -> Error {
    if (ArrayRef<int64_t>(t.shape) == expected)
      return Error::success();
    return cudaKernelError(call.opType + ": " + what + " has shape " +
                           formatShape(t.shape) + ", expected " +
                           formatShape(expected));
  };
  if (Error e = requireShape("dx", *dx, call.attrs.getInts("shape")))
    return e;
  int64_t rank = static_cast<int64_t>(dx->shape.size());
  if (rank == 0)
    return cudaKernelError("GatherGrad: data must have rank >= 1");
  auto axisOr = normalizeAxis(call.attrs.getInt("axis", 0), rank);
  if (!axisOr)
    return axisOr.takeError();
  int64_t axis = *axisOr;
  ArrayRef<int64_t> dataShape = dx->shape;
  Dims expected(dataShape.begin(), dataShape.begin() + axis);
  expected.append(indices->shape.begin(), indices->shape.end());
  expected.append(dataShape.begin() + axis + 1, dataShape.end());
  if (Error e = requireShape("dy", *dy, expected))
    return e;
  if (indices->dtype != DType::I64 && indices->dtype != DType::I32)
    return indicesTypeError(call, indices->dtype);

  int64_t dim = dataShape[axis];
  int64_t count = indices->numElements();
  int64_t outer = numElements(dataShape.take_front(axis));
  int64_t inner = numElements(dataShape.drop_front(axis + 1));
  if (dx->numElements() == 0)
    return Error::success();
  int64_t tasks = outer * dim * ((inner + kWarpColumns - 1) / kWarpColumns);
  unsigned blocks = gridFor(tasks * 32, kThreads);
  return dispatchFloat(dy->dtype, call.opType, [&](auto tag) -> Error {
    using T = decltype(tag);
    auto launch = [&](auto indexTag) -> Error {
      using I = decltype(indexTag);
      gatherGradKernel<T, I><<<blocks, kThreads, 0, call.stream>>>(
          static_cast<const I *>(indices->data),
          static_cast<const T *>(dy->data), static_cast<T *>(dx->data), outer,
          dim, inner, count);
      return checkLaunch("gatherGradKernel");
    };
    return indices->dtype == DType::I64 ? launch(int64_t{})
                                        : launch(int32_t{});
  });
}

} // namespace zinc::cuda
