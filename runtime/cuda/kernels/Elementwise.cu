//===- Elementwise.cu - Broadcasting arithmetic and activation kernels ----===//
//
// One grid-stride kernel per family. The host merges the broadcast into as
// few dimensions as possible (as the cpu driver does), so the common cases
// (same shapes, a scalar operand, a bias over the last dimension) need at
// most one division per 16 bytes of output. Each thread then moves 16-byte
// packs (float4, or eight 16-bit floats) whenever every pointer and the
// innermost dimension allow it. 16-bit floats are loaded, computed in float
// and rounded once on store, so results match the cpu kernels.
//
//===----------------------------------------------------------------------===//
#include "zinc/runtime/cuda/CudaCheck.h"
#include "zinc/runtime/cuda/Elementwise.h"
#include "zinc/support/Error.h"
#include "llvm/ADT/Twine.h"
#include <algorithm>
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <limits>

namespace zinc::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kPackBytes = 16;

//===----------------------------------------------------------------------===//
// Element access: load as float, store rounded to nearest even.
//===----------------------------------------------------------------------===//

__device__ __forceinline__ float toFloat(float v) { return v; }
__device__ __forceinline__ float toFloat(__half v) { return __half2float(v); }
__device__ __forceinline__ float toFloat(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

template <typename T> __device__ __forceinline__ T fromFloat(float v);
template <> __device__ __forceinline__ float fromFloat<float>(float v) {
  return v;
}
template <> __device__ __forceinline__ __half fromFloat<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 fromFloat<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

/// 16 bytes of elements, moved by one 128-bit load or store.
template <typename T> struct alignas(kPackBytes) Pack {
  static constexpr int kWidth = kPackBytes / sizeof(T);
  T v[kWidth];
};

//===----------------------------------------------------------------------===//
// Ops: float in, float out. Division and erf/exp/tanh are the accurate
// versions (no fast-math), so f32 agrees with the cpu to a few ulps.
//===----------------------------------------------------------------------===//

struct AddFn {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct SubFn {
  __device__ float operator()(float a, float b) const { return a - b; }
};
struct MulFn {
  __device__ float operator()(float a, float b) const { return a * b; }
};
struct DivFn {
  __device__ float operator()(float a, float b) const { return a / b; }
};
/// `v < 0 ? 0 : v` rather than fmaxf: NaN passes through, as on the cpu.
struct ReluFn {
  __device__ float operator()(float v) const { return v < 0.0f ? 0.0f : v; }
};
struct GeluFn {
  __device__ float operator()(float v) const {
    return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
  }
};
struct ExpFn {
  __device__ float operator()(float v) const { return expf(v); }
};
struct TanhFn {
  __device__ float operator()(float v) const { return tanhf(v); }
};

//===----------------------------------------------------------------------===//
// Binary kernel
//===----------------------------------------------------------------------===//

/// The merged broadcast, passed by value: output dims (outermost first) and
/// each operand's element stride along them (0 where it is broadcast).
/// Operands' innermost strides are always 0 or 1.
template <typename IndexT> struct BroadcastParams {
  int rank;
  IndexT dims[kMaxBroadcastRank];
  IndexT strideA[kMaxBroadcastRank];
  IndexT strideB[kMaxBroadcastRank];
};

/// Offsets into a and b of output element `e`. The outermost dimension
/// needs no modulo, so a flat (rank 1) operation costs no division at all.
template <typename IndexT>
__device__ __forceinline__ void offsetsOf(const BroadcastParams<IndexT> &p,
                                          IndexT e, IndexT &offA,
                                          IndexT &offB) {
  IndexT a = 0, b = 0;
  // Unrolled with constant indices so the parameters are read in place; a
  // loop to p.rank would copy the struct to local memory to index it.
#pragma unroll
  for (int d = kMaxBroadcastRank - 1; d > 0; --d) {
    if (d < p.rank) {
      IndexT idx = e % p.dims[d];
      e /= p.dims[d];
      a += idx * p.strideA[d];
      b += idx * p.strideB[d];
    }
  }
  offA = a + e * p.strideA[0];
  offB = b + e * p.strideB[0];
}

/// y[e] = op(a[...], b[...]) for `total` outputs. With Width > 1, each step
/// handles Width consecutive outputs that the host has checked lie in one
/// innermost row, with every non-broadcast operand and y 16-byte aligned;
/// an operand broadcast along the row is read once and repeated. Outputs
/// past the last whole group (a flat tail) are done one at a time. y may
/// be an operand of its own shape (in place), so nothing is __restrict__:
/// each element is read and then written by the same thread.
template <typename Op, typename T, typename IndexT, int Width>
__global__ void __launch_bounds__(kThreads)
    binaryKernel(const T *a, const T *b, T *y, IndexT total,
                 BroadcastParams<IndexT> p) {
  Op op;
  IndexT step = IndexT(gridDim.x) * blockDim.x;
  IndexT first = IndexT(blockIdx.x) * blockDim.x + threadIdx.x;
  IndexT groups = total / Width;
  if constexpr (Width > 1) {
    static_assert(Width == Pack<T>::kWidth, "a group is one pack");
    bool rowA = p.strideA[p.rank - 1] != 0, rowB = p.strideB[p.rank - 1] != 0;
    for (IndexT g = first; g < groups; g += step) {
      IndexT offA, offB;
      offsetsOf(p, g * Width, offA, offB);
      Pack<T> va, vb, vy;
      if (rowA) {
        va = *reinterpret_cast<const Pack<T> *>(a + offA);
      } else {
#pragma unroll
        for (int i = 0; i < Width; ++i)
          va.v[i] = a[offA];
      }
      if (rowB) {
        vb = *reinterpret_cast<const Pack<T> *>(b + offB);
      } else {
#pragma unroll
        for (int i = 0; i < Width; ++i)
          vb.v[i] = b[offB];
      }
#pragma unroll
      for (int i = 0; i < Width; ++i)
        vy.v[i] = fromFloat<T>(op(toFloat(va.v[i]), toFloat(vb.v[i])));
      *reinterpret_cast<Pack<T> *>(y + IndexT(g * Width)) = vy;
    }
  }
  for (IndexT e = groups * Width + first; e < total; e += step) {
    IndexT offA, offB;
    offsetsOf(p, e, offA, offB);
    y[e] = fromFloat<T>(op(toFloat(a[offA]), toFloat(b[offB])));
  }
}

//===----------------------------------------------------------------------===//
// Unary kernel
//===----------------------------------------------------------------------===//

/// y[i] = op(x[i]); in 16-byte packs when both pointers are aligned (x and
/// y may alias, so no __restrict__), then a scalar tail.
template <typename Op, typename T>
__global__ void __launch_bounds__(kThreads)
    unaryKernel(const T *x, T *y, int64_t n, bool packed) {
  constexpr int W = Pack<T>::kWidth;
  Op op;
  int64_t step = int64_t(gridDim.x) * blockDim.x;
  int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t head = 0;
  if (packed) {
    int64_t packs = n / W;
    for (int64_t i = first; i < packs; i += step) {
      Pack<T> v = reinterpret_cast<const Pack<T> *>(x)[i];
#pragma unroll
      for (int j = 0; j < W; ++j)
        v.v[j] = fromFloat<T>(op(toFloat(v.v[j])));
      reinterpret_cast<Pack<T> *>(y)[i] = v;
    }
    head = packs * W;
  }
  for (int64_t i = head + first; i < n; i += step)
    y[i] = fromFloat<T>(op(toFloat(x[i])));
}

} // namespace

//===----------------------------------------------------------------------===//
// Host side
//===----------------------------------------------------------------------===//

llvm::StringRef opName(BinaryOpKind op) {
  switch (op) {
  case BinaryOpKind::Add:
    return "Add";
  case BinaryOpKind::Sub:
    return "Sub";
  case BinaryOpKind::Mul:
    return "Mul";
  case BinaryOpKind::Div:
    return "Div";
  }
  return "?";
}

llvm::StringRef opName(UnaryOpKind op) {
  switch (op) {
  case UnaryOpKind::Relu:
    return "Relu";
  case UnaryOpKind::Gelu:
    return "Gelu";
  case UnaryOpKind::Exp:
    return "Exp";
  case UnaryOpKind::Tanh:
    return "Tanh";
  }
  return "?";
}

static llvm::Error unsupportedType(llvm::StringRef op, DType t) {
  return makeError("unsupported: " + op +
                   " on the cuda backend with element type " + dtypeName(t));
}

static bool isKernelType(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

/// Calls fn(T{}) with the device element type of `t`; an error naming the op
/// for types these kernels do not cover.
template <typename Fn>
static llvm::Error visitFloatType(llvm::StringRef op, DType t, Fn &&fn) {
  switch (t) {
  case DType::F32:
    return fn(float{});
  case DType::F16:
    return fn(__half{});
  case DType::BF16:
    return fn(__nv_bfloat16{});
  default:
    return unsupportedType(op, t);
  }
}

template <typename Fn>
static llvm::Error visitBinaryOp(BinaryOpKind op, Fn &&fn) {
  switch (op) {
  case BinaryOpKind::Add:
    return fn(AddFn{});
  case BinaryOpKind::Sub:
    return fn(SubFn{});
  case BinaryOpKind::Mul:
    return fn(MulFn{});
  case BinaryOpKind::Div:
    return fn(DivFn{});
  }
  return makeError("unknown binary op");
}

template <typename Fn>
static llvm::Error visitUnaryOp(UnaryOpKind op, Fn &&fn) {
  switch (op) {
  case UnaryOpKind::Relu:
    return fn(ReluFn{});
  case UnaryOpKind::Gelu:
    return fn(GeluFn{});
  case UnaryOpKind::Exp:
    return fn(ExpFn{});
  case UnaryOpKind::Tanh:
    return fn(TanhFn{});
  }
  return makeError("unknown unary op");
}

static bool isAligned(const void *p) {
  return reinterpret_cast<uintptr_t>(p) % kPackBytes == 0;
}

/// Enough blocks to fill the device once (grid-stride loops do the rest),
/// fewer for small work. The SM count is cached by the runtime, so asking
/// per launch costs no driver round trip.
static llvm::Error gridFor(int64_t work, unsigned &grid) {
  int device = 0, sms = 0;
  if (llvm::Error err = checkCuda(cudaGetDevice(&device), "cudaGetDevice"))
    return err;
  if (llvm::Error err = checkCuda(
          cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device),
          "cudaDeviceGetAttribute(multiprocessor count)"))
    return err;
  int64_t full = int64_t(sms) * (2048 / kThreads);
  int64_t need = (work + kThreads - 1) / kThreads;
  grid = static_cast<unsigned>(std::max<int64_t>(1, std::min(need, full)));
  return llvm::Error::success();
}

/// The merged broadcast of a and b onto y's shape, as int64 before it is
/// narrowed to the kernel's index type.
struct MergedBroadcast {
  llvm::SmallVector<int64_t, 6> dims, strideA, strideB;
};

/// Strides reading `in` (right-aligned against `out`) at out's indices.
static llvm::SmallVector<int64_t, 6>
broadcastStrides(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> out) {
  llvm::SmallVector<int64_t, 6> strides(out.size(), 0);
  int64_t s = 1;
  for (size_t i = 0; i < in.size(); ++i) {
    size_t d = out.size() - 1 - i, k = in.size() - 1 - i;
    strides[d] = in[k] == 1 ? 0 : s;
    s *= in[k];
  }
  return strides;
}

/// Drops size-1 dimensions and merges neighbours along which both operands
/// are contiguous or both broadcast, so `[B,S,H] + [H]` is rows of H and
/// equal shapes are one flat dimension.
static MergedBroadcast mergeBroadcast(llvm::ArrayRef<int64_t> a,
                                      llvm::ArrayRef<int64_t> b,
                                      llvm::ArrayRef<int64_t> out) {
  llvm::SmallVector<int64_t, 6> sa = broadcastStrides(a, out);
  llvm::SmallVector<int64_t, 6> sb = broadcastStrides(b, out);
  MergedBroadcast m;
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] == 1)
      continue;
    if (!m.dims.empty() && m.strideA.back() == sa[d] * out[d] &&
        m.strideB.back() == sb[d] * out[d]) {
      m.dims.back() *= out[d];
      m.strideA.back() = sa[d];
      m.strideB.back() = sb[d];
      continue;
    }
    m.dims.push_back(out[d]);
    m.strideA.push_back(sa[d]);
    m.strideB.push_back(sb[d]);
  }
  if (m.dims.empty()) {
    m.dims.push_back(1);
    m.strideA.push_back(0);
    m.strideB.push_back(0);
  }
  return m;
}

/// The numpy broadcast of two shapes, or None.
static llvm::Optional<llvm::SmallVector<int64_t, 6>>
broadcastShape(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  llvm::SmallVector<int64_t, 6> out(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
    int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (da != db && da != 1 && db != 1)
      return llvm::None;
    out[rank - 1 - i] = da == 1 ? db : da;
  }
  return out;
}

template <typename Op, typename T, typename IndexT, int Width>
static llvm::Error launchBinaryAs(const DeviceTensor &a, const DeviceTensor &b,
                                  const DeviceTensor &y,
                                  const MergedBroadcast &m, cudaStream_t stream,
                                  llvm::StringRef name) {
  BroadcastParams<IndexT> p{};
  p.rank = static_cast<int>(m.dims.size());
  for (int d = 0; d < p.rank; ++d) {
    p.dims[d] = static_cast<IndexT>(m.dims[d]);
    p.strideA[d] = static_cast<IndexT>(m.strideA[d]);
    p.strideB[d] = static_cast<IndexT>(m.strideB[d]);
  }
  int64_t total = y.numElements();
  unsigned grid = 0;
  if (llvm::Error err = gridFor((total + Width - 1) / Width, grid))
    return err;
  binaryKernel<Op, T, IndexT, Width><<<grid, kThreads, 0, stream>>>(
      static_cast<const T *>(a.data), static_cast<const T *>(b.data),
      static_cast<T *>(y.data), static_cast<IndexT>(total), p);
  return checkLaunch(name + " kernel (" + dtypeName(y.dtype) + ")");
}

llvm::Error launchBinary(BinaryOpKind op, const DeviceTensor &a,
                         const DeviceTensor &b, const DeviceTensor &y,
                         cudaStream_t stream) {
  llvm::StringRef name = opName(op);
  if (a.dtype != b.dtype || a.dtype != y.dtype)
    return makeError(name + ": element types " + dtypeName(a.dtype) + ", " +
                     dtypeName(b.dtype) + " -> " + dtypeName(y.dtype) +
                     " differ");
  auto shape = broadcastShape(a.shape, b.shape);
  if (!shape)
    return makeError(name + ": shapes " + formatShape(a.shape) + " and " +
                     formatShape(b.shape) + " do not broadcast");
  if (*shape != y.shape)
    return makeError(name + ": output shape " + formatShape(y.shape) +
                     ", expected " + formatShape(*shape));
  if (!isKernelType(y.dtype))
    return unsupportedType(name, y.dtype);
  MergedBroadcast m = mergeBroadcast(a.shape, b.shape, y.shape);
  if (m.dims.size() > size_t(kMaxBroadcastRank))
    return makeError("unsupported: " + name + " of " + formatShape(a.shape) +
                     " and " + formatShape(b.shape) + " needs " +
                     llvm::Twine(m.dims.size()) + " broadcast dimensions, " +
                     "more than " + llvm::Twine(kMaxBroadcastRank));
  int64_t total = y.numElements();
  if (total == 0)
    return llvm::Error::success();
  if (!a.data || !b.data || !y.data)
    return makeError(name + ": null device pointer");

  return visitFloatType(name, y.dtype, [&](auto tag) -> llvm::Error {
    using T = decltype(tag);
    constexpr int W = Pack<T>::kWidth;
    // Packs need every operand read along the row and y aligned, and
    // whole packs per row (a flat operation may leave a tail).
    bool rowA = m.strideA.back() != 0, rowB = m.strideB.back() != 0;
    bool packed = isAligned(y.data) && (!rowA || isAligned(a.data)) &&
                  (!rowB || isAligned(b.data)) &&
                  (m.dims.size() == 1 || m.dims.back() % W == 0);
    // 32-bit indices make the per-pack divisions several times cheaper.
    // Every offset is below its operand's element count; the bound is
    // INT32_MAX, not UINT32_MAX, so that `index + grid size` in the
    // grid-stride loop cannot wrap.
    constexpr int64_t kMax32 = std::numeric_limits<int32_t>::max();
    bool narrow = total <= kMax32 && a.numElements() <= kMax32 &&
                  b.numElements() <= kMax32;
    return visitBinaryOp(op, [&](auto fn) -> llvm::Error {
      using Op = decltype(fn);
      if (narrow)
        return packed ? launchBinaryAs<Op, T, uint32_t, W>(a, b, y, m, stream,
                                                           name)
                      : launchBinaryAs<Op, T, uint32_t, 1>(a, b, y, m, stream,
                                                           name);
      return packed
                 ? launchBinaryAs<Op, T, uint64_t, W>(a, b, y, m, stream, name)
                 : launchBinaryAs<Op, T, uint64_t, 1>(a, b, y, m, stream, name);
    });
  });
}

llvm::Error launchUnary(UnaryOpKind op, const DeviceTensor &x,
                        const DeviceTensor &y, cudaStream_t stream) {
  llvm::StringRef name = opName(op);
  if (x.dtype != y.dtype)
    return makeError(name + ": element types " + dtypeName(x.dtype) + " -> " +
                     dtypeName(y.dtype) + " differ");
  if (x.shape != y.shape)
    return makeError(name + ": output shape " + formatShape(y.shape) +
                     ", expected " + formatShape(x.shape));
  if (!isKernelType(y.dtype))
    return unsupportedType(name, y.dtype);
  int64_t n = y.numElements();
  if (n == 0)
    return llvm::Error::success();
  if (!x.data || !y.data)
    return makeError(name + ": null device pointer");

  return visitFloatType(name, y.dtype, [&](auto tag) -> llvm::Error {
    using T = decltype(tag);
    bool packed = isAligned(x.data) && isAligned(y.data);
    unsigned grid = 0;
    if (llvm::Error err = gridFor(
            packed ? (n + Pack<T>::kWidth - 1) / Pack<T>::kWidth : n, grid))
      return err;
    return visitUnaryOp(op, [&](auto fn) -> llvm::Error {
      unaryKernel<decltype(fn), T><<<grid, kThreads, 0, stream>>>(
          static_cast<const T *>(x.data), static_cast<T *>(y.data), n, packed);
      return checkLaunch(name + " kernel (" + dtypeName(y.dtype) + ")");
    });
  });
}

} // namespace zinc::cuda
