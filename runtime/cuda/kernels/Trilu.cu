//===- Trilu.cu - Trilu: the upper or lower triangle of matrices ----------===//
//
// Trilu keeps the elements of each innermost [rows, cols] matrix on one side
// of diagonal k (MiscMath.h's triluKeeps, the cpu's rule) and zeroes the
// rest. It never looks at values, so it is instantiated per element size,
// zero being all-zero bits in every type. k, an optional scalar, is read on
// the host where the host may read it and by the kernel otherwise
// (ScalarOperand.h).
//
//===----------------------------------------------------------------------===//
#include "CudaKernels.h"
#include "MatMulBias.h"
#include "MiscMath.h"
#include "ScalarOperand.h"
#include "zinc/runtime/cuda/CudaCheck.h"
#include "llvm/ADT/Twine.h"
#include <cstdint>

namespace zinc::cuda {
namespace {

using llvm::Error;

constexpr unsigned kThreads = 256;

/// Where the kernel finds k: its value, or an i32/i64 on the device.
struct DiagonalArg {
  int64_t value = 0;
  const void *device = nullptr;
  bool device64 = true;

  __device__ int64_t get() const {
    if (!device)
      return value;
    return device64 ? *static_cast<const int64_t *>(device)
                    : int64_t(*static_cast<const int32_t *>(device));
  }
};

/// y = x on the kept side of the diagonal, 0 elsewhere; x and y may be one
/// buffer (each element is read and written by one thread).
template <typename U>
__global__ void __launch_bounds__(kThreads)
    triluKernel(const U *x, U *y, int64_t n, int64_t rows, int64_t cols,
                bool upper, DiagonalArg diagonal) {
  int64_t k = diagonal.get();
  int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += step) {
    int64_t i, j;
    misc::triluPosition(e, rows, cols, i, j);
    y[e] = misc::triluKeeps(i, j, k, upper, rows, cols) ? x[e] : U(0);
  }
}

template <typename U>
Error launchTrilu(const void *x, void *y, int64_t n, int64_t rows, int64_t cols,
                  bool upper, DiagonalArg k, cudaStream_t stream) {
  triluKernel<U><<<gridFor(n, kThreads), kThreads, 0, stream>>>(
      static_cast<const U *>(x), static_cast<U *>(y), n, rows, cols, upper, k);
  return checkLaunch("triluKernel");
}

} // namespace

Error launchZeroAboveDiagonal(DType dtype, void *y, int64_t matrices,
                              int64_t rows, int64_t cols, cudaStream_t stream) {
  int64_t n = matrices * rows * cols;
  if (n == 0)
    return Error::success();
  DiagonalArg k; // 0: keep j <= i
  switch (dtypeSize(dtype)) {
  case 1:
    return launchTrilu<uint8_t>(y, y, n, rows, cols, false, k, stream);
  case 2:
    return launchTrilu<uint16_t>(y, y, n, rows, cols, false, k, stream);
  case 4:
    return launchTrilu<uint32_t>(y, y, n, rows, cols, false, k, stream);
  case 8:
    return launchTrilu<uint64_t>(y, y, n, rows, cols, false, k, stream);
  default:
    return cudaKernelError("unsupported: zeroing above the diagonal of " +
                           dtypeName(dtype) + " on the cuda backend");
  }
}

/// Trilu(input, [k]) -> output; attribute upper (default 1).
Error runTrilu(const CudaKernelCall &call) {
  const DeviceTensor *in = call.input(0);
  DeviceTensor *out = call.output(0);
  if (!in)
    return cudaKernelError(call.opType + ": input 0 is missing");
  if (!out)
    return cudaKernelError(call.opType + ": output 0 is missing");
  if (in->dtype != out->dtype)
    return cudaKernelError(call.opType + ": input has type " +
                           dtypeName(in->dtype) + " but output has type " +
                           dtypeName(out->dtype));
  size_t rank = in->shape.size();
  if (rank < 2)
    return cudaKernelError("Trilu: input must have rank >= 2, it has shape " +
                           formatShape(in->shape));
  if (out->shape != in->shape)
    return cudaKernelError(
        call.opType + ": output shape " + formatShape(out->shape) +
        " differs from the expected " + formatShape(in->shape));
  const DeviceTensor *kt = call.input(1);
  if (kt && kt->numElements() != 1)
    return cudaKernelError("Trilu: k must be a scalar");
  if (kt && kt->dtype != DType::I64 && kt->dtype != DType::I32)
    return cudaKernelError("unsupported: Trilu with k of " +
                           dtypeName(kt->dtype) +
                           " on the cuda backend (i32, i64)");
  bool upper = call.attrs.getInt("upper", 1) != 0;
  int64_t rows = in->shape[rank - 2], cols = in->shape[rank - 1];
  int64_t n = in->numElements();
  if (n == 0)
    return Error::success();
  auto s = locateScalar(call, kt, "k");
  if (!s)
    return s.takeError();
  DiagonalArg k;
  k.device = s->device;
  k.device64 = !kt || kt->dtype == DType::I64;
  if (s->present && !s->device)
    k.value = kt->dtype == DType::I64 ? s->hostValue<int64_t>()
                                      : s->hostValue<int32_t>();
  if (!in->data || !out->data)
    return cudaKernelError(call.opType + ": null device pointer");
  switch (dtypeSize(in->dtype)) {
  case 1:
    return launchTrilu<uint8_t>(in->data, out->data, n, rows, cols, upper, k,
                                call.stream);
  case 2:
    return launchTrilu<uint16_t>(in->data, out->data, n, rows, cols, upper, k,
                                 call.stream);
  case 4:
    return launchTrilu<uint32_t>(in->data, out->data, n, rows, cols, upper, k,
                                 call.stream);
  case 8:
    return launchTrilu<uint64_t>(in->data, out->data, n, rows, cols, upper, k,
                                 call.stream);
  default:
    return cudaKernelError("unsupported: Trilu of " + dtypeName(in->dtype) +
                           " on the cuda backend");
  }
}

} // namespace zinc::cuda
