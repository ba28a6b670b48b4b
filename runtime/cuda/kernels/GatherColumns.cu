//===- GatherColumns.cu - Column tiles of an embedding lookup -------------===//
//
// zinc.GatherColumns(data [V, d], ids) -> Y and zinc.GatherColumnsInto(data,
// ids, Y): the tile pass's pieces of an embedding lookup split by columns.
// Each copies row ids[j] of data into columns [outColumn, outColumn + d) of
// row j of Y and leaves Y's other columns alone (the other tiles write
// them in place). Bytes move without being looked at, in the widest unit
// (16, 8 or 4 bytes) that the rows, the column offset and both addresses
// allow.
//
// Indices live on the device, so one out of range cannot be reported
// without a synchronisation: its row is written as zeros, as Gather does,
// where the cpu kernel returns an error.
//
//===----------------------------------------------------------------------===//
#include "CudaKernels.h"
#include "LayoutMath.h"
#include "MiscMath.h"
#include "WordTypes.cuh"
#include "zinc/runtime/cuda/CudaCheck.h"
#include "llvm/ADT/Twine.h"
#include <cstdint>

namespace zinc::cuda {
namespace {

using llvm::Error;
using llvm::Twine;

constexpr unsigned kThreads = 256;

/// Y[j, column + c] = data[ids[j], c] for the `count * width` units of the
/// tile (all in units of U).
template <typename U, typename I>
__global__ void __launch_bounds__(kThreads)
    gatherColumnsKernel(const U *__restrict__ data,
                        const I *__restrict__ indices, U *__restrict__ out,
                        int64_t units, int64_t rows, int64_t width,
                        int64_t total, int64_t column) {
  int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < units;
       e += step) {
    int64_t j, c;
    int64_t dst = misc::gatherColumnsDest(e, width, total, column, j, c);
    int64_t row = wrapIndex(static_cast<int64_t>(indices[j]), rows);
    out[dst] = row < 0 ? U{} : data[row * width + c];
  }
}

/// The widest unit (16, 8 or 4 bytes, at least the element) that divides
/// the tile's row, Y's row, the column offset and both addresses.
int unitOf(int elemBytes, int64_t widthBytes, int64_t totalBytes,
           int64_t columnBytes, const void *src, const void *dst) {
  for (int unit : {16, 8, 4})
    if (unit > elemBytes && widthBytes % unit == 0 && totalBytes % unit == 0 &&
        columnBytes % unit == 0 &&
        reinterpret_cast<uintptr_t>(src) % unit == 0 &&
        reinterpret_cast<uintptr_t>(dst) % unit == 0)
      return unit;
  return elemBytes;
}

template <typename U>
Error launchColumns(const void *data, const void *indices, bool indices64,
                    void *out, int64_t count, int64_t rows, int64_t width,
                    int64_t total, int64_t column, cudaStream_t stream) {
  int64_t units = count * width;
  auto launch = [&](auto indexTag) -> Error {
    using I = decltype(indexTag);
    gatherColumnsKernel<U, I>
        <<<gridFor(units, kThreads), kThreads, 0, stream>>>(
            static_cast<const U *>(data), static_cast<const I *>(indices),
            static_cast<U *>(out), units, rows, width, total, column);
    return checkLaunch("gatherColumnsKernel");
  };
  return indices64 ? launch(int64_t{}) : launch(int32_t{});
}

Error runGatherColumnsOf(const CudaKernelCall &call, bool into) {
  const DeviceTensor *data = call.input(0), *indices = call.input(1);
  DeviceTensor *out = into ? call.updated(2) : call.output(0);
  if (!data || !indices || !out || data->shape.size() != 2 ||
      out->shape.empty())
    return cudaKernelError(call.opType +
                           ": expects data [V, d], indices and an output");
  int64_t rows = data->shape[0], width = data->shape[1];
  int64_t total = out->shape.back();
  int64_t column = call.attrs.getInt("outColumn", 0);
  int64_t count = indices->numElements();
  if (out->dtype != data->dtype || column < 0 || column + width > total ||
      out->numElements() != count * total)
    return cudaKernelError(call.opType + ": output " + dtypeName(out->dtype) +
                           formatShape(out->shape) + " cannot take columns [" +
                           Twine(column) + ", " + Twine(column + width) +
                           ") of " + Twine(count) + " rows");
  if (indices->dtype != DType::I64 && indices->dtype != DType::I32)
    return cudaKernelError("unsupported: " + call.opType + " with indices of " +
                           dtypeName(indices->dtype) +
                           " on the cuda backend (i32, i64)");
  if (count == 0 || width == 0)
    return Error::success();
  if (!data->data || !indices->data || !out->data)
    return cudaKernelError(call.opType + ": null device pointer");
  int elemBytes = static_cast<int>(dtypeSize(data->dtype));
  int unit = unitOf(elemBytes, width * elemBytes, total * elemBytes,
                    column * elemBytes, data->data, out->data);
  int64_t ratio = unit / elemBytes;
  bool indices64 = indices->dtype == DType::I64;
  auto launch = [&](auto unitTag) {
    using U = decltype(unitTag);
    return launchColumns<U>(data->data, indices->data, indices64, out->data,
                            count, rows, width / ratio, total / ratio,
                            column / ratio, call.stream);
  };
  if (unit != 1 && unit != 2 && unit != 4 && unit != 8 && unit != 16)
    return cudaKernelError("unsupported: an element of " + Twine(elemBytes) +
                           " bytes on the cuda backend");
  return withWordType(unit, launch);
}

} // namespace

Error runGatherColumns(const CudaKernelCall &call) {
  return runGatherColumnsOf(call, /*into=*/false);
}

Error runGatherColumnsInto(const CudaKernelCall &call) {
  return runGatherColumnsOf(call, /*into=*/true);
}

} // namespace zinc::cuda
