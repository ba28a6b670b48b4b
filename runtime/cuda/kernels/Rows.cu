//===- Rows.cu - LayerNormalization, RmsNorm, their gradients, reductions -===//
//
// Row statistics are block reductions in float with a fixed shape (warp
// shuffles, then the warps' partials added in order), so every result is
// deterministic run to run; the cpu kernels sum in double, so f32 agrees
// with them to a few ulps of the row, not bit for bit. Column sums (the
// scale and bias gradients, a bias gradient's ReduceSum) are one block per
// 32 columns whose 32 row phases are added in order, again deterministic
// and without atomics or scratch.
//
// Everything a user can get wrong is checked on the host, before anything
// is queued, with the cpu kernels' messages. What only the device knows
// cannot be checked without a synchronisation: an axes tensor's values are
// trusted where the shapes settle them, and matched on the device against
// the few readings the shapes allow where they do not.
//
//===----------------------------------------------------------------------===//
#include "BlockReduce.cuh"
#include "CudaKernels.h"
#include "DeviceTypes.cuh"
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
using llvm::SmallVectorImpl;
using llvm::Twine;

/// Column kernels' block: 32 columns by 32 row phases.
constexpr int kTile = 32;
/// Blocks of the row kernels: rows beyond this are a grid-stride loop.
constexpr int64_t kMaxRowBlocks = 132 * 32;

unsigned rowBlocks(int64_t rows) {
  return static_cast<unsigned>(std::clamp<int64_t>(rows, 1, kMaxRowBlocks));
}

//===----------------------------------------------------------------------===//
// Device helpers
//===----------------------------------------------------------------------===//

/// The sum of every thread's `v` over the block (blockDim.x a multiple of
/// 32), returned to all threads; `shared` holds 32 floats. The warps'
/// partials are added in warp order, so the result does not vary.
__device__ float blockSum(float v, float *shared) {
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warpSum(v);
  __syncthreads(); // the previous call's readers are done with `shared`
  if (lane == 0)
    shared[warp] = v;
  __syncthreads();
  float total = 0;
  for (int w = 0; w < int(blockDim.x / 32); ++w)
    total += shared[w];
  return total;
}

/// A statistics tensor (Mean, InvStdDev) of any float type.
enum class StatKind : int { F32, F16, BF16, F64 };

struct StatRef {
  void *data = nullptr;
  StatKind kind = StatKind::F32;
};

__device__ __forceinline__ float loadStat(const StatRef &s, int64_t i) {
  switch (s.kind) {
  case StatKind::F16:
    return __half2float(static_cast<const __half *>(s.data)[i]);
  case StatKind::BF16:
    return __bfloat162float(static_cast<const __nv_bfloat16 *>(s.data)[i]);
  case StatKind::F64:
    return static_cast<float>(static_cast<const double *>(s.data)[i]);
  default:
    return static_cast<const float *>(s.data)[i];
  }
}

__device__ __forceinline__ void storeStat(const StatRef &s, int64_t i,
                                          float v) {
  if (!s.data)
    return;
  switch (s.kind) {
  case StatKind::F16:
    static_cast<__half *>(s.data)[i] = __float2half_rn(v);
    return;
  case StatKind::BF16:
    static_cast<__nv_bfloat16 *>(s.data)[i] = __float2bfloat16_rn(v);
    return;
  case StatKind::F64:
    static_cast<double *>(s.data)[i] = v;
    return;
  default:
    static_cast<float *>(s.data)[i] = v;
  }
}

/// Mean and inverse deviation of one row, two passes; the forward kernel
/// and the gradient (when it recomputes them) share this, so they agree.
template <typename T>
__device__ void rowStatistics(const T *row, int64_t d, float epsilon,
                              float *shared, float &mean, float &invStd) {
  float s = 0;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
    s += loadF(row[j]);
  mean = d ? blockSum(s, shared) / static_cast<float>(d) : 0.0f;
  float q = 0;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    float v = loadF(row[j]) - mean;
    q += v * v;
  }
  invStd = layerNormInvStd(blockSum(q, shared), d, epsilon);
}

//===----------------------------------------------------------------------===//
// LayerNormalization kernels
//===----------------------------------------------------------------------===//

/// One block per row (grid-stride): statistics, then y.
template <typename T>
__global__ void layerNormKernel(const T *__restrict__ x,
                                const T *__restrict__ scale,
                                const T *__restrict__ bias, T *__restrict__ y,
                                int64_t outer, int64_t d, float epsilon,
                                AffineIndex scaleIdx, AffineIndex biasIdx,
                                StatRef meanOut, StatRef invStdOut) {
  __shared__ float shared[32];
  for (int64_t o = blockIdx.x; o < outer; o += gridDim.x) {
    const T *row = x + o * d;
    float mean, invStd;
    rowStatistics(row, d, epsilon, shared, mean, invStd);
    T *out = y + o * d;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
      float g = loadF(scale[affineIndex(scaleIdx, j)]);
      float b = bias ? loadF(bias[affineIndex(biasIdx, j)]) : 0.0f;
      out[j] = storeF<T>(layerNormValue(loadF(row[j]), mean, invStd, g, b));
    }
    if (threadIdx.x == 0) {
      storeStat(meanOut, o, mean);
      storeStat(invStdOut, o, invStd);
    }
  }
}

/// dx, one block per row. The statistics come from `meanIn`/`invStdIn` or
/// are recomputed (null data); recomputed ones are saved to `meanSave` and
/// `invStdSave` (f32 scratch) for the column kernel.
template <typename T>
__global__ void layerNormGradRowsKernel(
    const T *__restrict__ dy, const T *__restrict__ x,
    const T *__restrict__ scale, T *__restrict__ dx, int64_t outer, int64_t d,
    float epsilon, AffineIndex scaleIdx, StatRef meanIn, StatRef invStdIn,
    float *meanSave, float *invStdSave) {
  __shared__ float shared[32];
  for (int64_t o = blockIdx.x; o < outer; o += gridDim.x) {
    const T *xr = x + o * d, *dyr = dy + o * d;
    float mean, invStd;
    if (meanIn.data) {
      mean = loadStat(meanIn, o);
      invStd = loadStat(invStdIn, o);
    } else {
      rowStatistics(xr, d, epsilon, shared, mean, invStd);
      if (threadIdx.x == 0 && meanSave) {
        meanSave[o] = mean;
        invStdSave[o] = invStd;
      }
    }
    float sumG = 0, sumGX = 0;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
      float g = loadF(dyr[j]) * loadF(scale[affineIndex(scaleIdx, j)]);
      float xhat = (loadF(xr[j]) - mean) * invStd;
      sumG += g;
      sumGX += g * xhat;
    }
    float fd = static_cast<float>(d);
    float meanG = d ? blockSum(sumG, shared) / fd : 0.0f;
    float meanGX = d ? blockSum(sumGX, shared) / fd : 0.0f;
    T *dxr = dx + o * d;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
      dxr[j] = storeF<T>(layerNormGradValue(
          loadF(dyr[j]), loadF(xr[j]), loadF(scale[affineIndex(scaleIdx, j)]),
          mean, invStd, meanG, meanGX));
  }
}

/// Per column j over all rows: sum(dy * xhat) into dscale[j] and sum(dy)
/// into dbias[j] (when given). Block (32, 32): threadIdx.y takes rows
/// y, y + 32, ...; the 32 partials are then added in order.
template <typename T, typename TOut>
__global__ void layerNormGradColumnsKernel(const T *__restrict__ dy,
                                           const T *__restrict__ x,
                                           int64_t outer, int64_t d,
                                           StatRef mean, StatRef invStd,
                                           TOut *dscale, TOut *dbias) {
  __shared__ float sScale[kTile][kTile + 1], sBias[kTile][kTile + 1];
  int tx = threadIdx.x, ty = threadIdx.y;
  int64_t j = int64_t(blockIdx.x) * kTile + tx;
  float accScale = 0, accBias = 0;
  if (j < d)
    for (int64_t o = ty; o < outer; o += kTile) {
      float g = loadF(dy[o * d + j]);
      float xhat = (loadF(x[o * d + j]) - loadStat(mean, o)) *
                   loadStat(invStd, o);
      accScale += g * xhat;
      accBias += g;
    }
  sScale[ty][tx] = accScale;
  sBias[ty][tx] = accBias;
  __syncthreads();
  if (ty != 0 || j >= d)
    return;
  float s = 0, b = 0;
  for (int k = 0; k < kTile; ++k) {
    s += sScale[k][tx];
    b += sBias[k][tx];
  }
  dscale[j] = storeF<TOut>(s);
  if (dbias)
    dbias[j] = storeF<TOut>(b);
}

//===----------------------------------------------------------------------===//
// Reduction kernels
//===----------------------------------------------------------------------===//

/// Sums of floats are accumulated in float, of integers in 64 bits,
/// wrapping like the cpu kernel's.
__device__ __forceinline__ float accLoad(float v) { return v; }
__device__ __forceinline__ float accLoad(__half v) { return loadF(v); }
__device__ __forceinline__ float accLoad(__nv_bfloat16 v) { return loadF(v); }
__device__ __forceinline__ unsigned long long accLoad(int32_t v) {
  return static_cast<unsigned long long>(static_cast<int64_t>(v));
}
__device__ __forceinline__ unsigned long long accLoad(int64_t v) {
  return static_cast<unsigned long long>(v);
}
template <typename T> using AccOf = decltype(accLoad(T{}));

/// Which reduction of the sum family: the sum, the mean (rounded once), or
/// the 2-norm (the square root of the sum of squares).
enum class ReduceOp { Sum, Mean, L2 };

/// The accumulator of a reduction: the norm's squares sum in double, as
/// the cpu's do (in float, squares below 1e-19 flush to 0 and above 1.8e19
/// overflow).
template <ReduceOp Op, typename T>
using AccFor = std::conditional_t<Op == ReduceOp::L2, double, AccOf<T>>;

/// What element v adds to the accumulator.
template <ReduceOp Op, typename T> __device__ __forceinline__ AccFor<Op, T> accTerm(T v) {
  AccFor<Op, T> a = accLoad(v);
  if constexpr (Op == ReduceOp::L2)
    return a * a;
  else
    return a;
}

/// The output of an accumulated `a` over `n` elements: the mean rounded
/// once, an integer mean truncated toward zero (n > 0 is checked on the
/// host), or the norm's square root.
template <typename TOut, ReduceOp Op, typename Acc>
__device__ __forceinline__ TOut finishAcc(Acc a, int64_t n) {
  if constexpr (std::is_integral_v<TOut>) {
    int64_t v = static_cast<int64_t>(a);
    return static_cast<TOut>(Op == ReduceOp::Mean ? v / n : v);
  } else {
    if constexpr (Op == ReduceOp::L2)
      return storeF<TOut>(static_cast<float>(sqrt(static_cast<double>(a))));
    else
      return storeF<TOut>(Op == ReduceOp::Mean ? a / static_cast<float>(n) : a);
  }
}

/// What an output is set to when the device's axes match none of the
/// readings the host allowed: NaN for floats, so it cannot pass unseen.
template <typename TOut> __device__ __forceinline__ TOut poison() {
  if constexpr (std::is_integral_v<TOut>)
    return TOut(0);
  else
    return storeF<TOut>(__int_as_float(0x7fc00000));
}

/// out[o] = reduce(in[o, :]) for [outer, red]: one warp per output.
template <typename TIn, typename TOut, ReduceOp Op>
__global__ void reduceRowsKernel(const TIn *__restrict__ in,
                                 TOut *__restrict__ out, int64_t outer,
                                 int64_t red) {
  using Acc = AccFor<Op, TIn>;
  int lane = threadIdx.x % 32;
  int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  for (int64_t o = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
       o < outer; o += warps) {
    const TIn *row = in + o * red;
    Acc a = 0;
    for (int64_t j = lane; j < red; j += 32)
      a += accTerm<Op>(row[j]);
#pragma unroll
    for (int m = 16; m > 0; m /= 2)
      a += __shfl_xor_sync(0xffffffffu, a, m);
    if (lane == 0)
      out[o] = finishAcc<TOut, Op>(a, red);
  }
}

/// out[o, i] = reduce_j in[o, j, i] for [outer, red, inner] with many rows
/// and few columns (a bias gradient): block (32, 32) per 32 columns of one
/// o, row phases added in order.
template <typename TIn, typename TOut, ReduceOp Op>
__global__ void reduceColumnsKernel(const TIn *__restrict__ in,
                                    TOut *__restrict__ out, int64_t outer,
                                    int64_t red, int64_t inner) {
  using Acc = AccFor<Op, TIn>;
  __shared__ Acc partial[kTile][kTile + 1];
  int tx = threadIdx.x, ty = threadIdx.y;
  int64_t i = int64_t(blockIdx.x) * kTile + tx;
  for (int64_t o = blockIdx.y; o < outer; o += gridDim.y) {
    Acc a = 0;
    if (i < inner)
      for (int64_t j = ty; j < red; j += kTile)
        a += accTerm<Op>(in[(o * red + j) * inner + i]);
    partial[ty][tx] = a;
    __syncthreads();
    if (ty == 0 && i < inner) {
      Acc s = 0;
      for (int k = 0; k < kTile; ++k)
        s += partial[k][tx];
      out[o * inner + i] = finishAcc<TOut, Op>(s, red);
    }
    __syncthreads();
  }
}

/// Any reduction: one thread per output, looping over its reduced elements
/// (the innermost reduced dimension without divisions). For [N, C] summed
/// over N the threads of a warp read consecutive columns.
template <typename TIn, typename TOut, ReduceOp Op>
__global__ void reduceGenericKernel(const TIn *__restrict__ in,
                                    TOut *__restrict__ out, int64_t outCount,
                                    ReduceChoices c) {
  using Acc = AccFor<Op, TIn>;
  int pick = 0;
  if (c.count > 1) {
    int64_t mask =
        c.axes64 ? effectiveAxesMask(static_cast<const int64_t *>(c.axes),
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
      out[o] = poison<TOut>();
    return;
  }
  const ReducePlan &p = c.plans[pick];
  bool anyReduced = p.rank > p.keptRank;
  int64_t len = anyReduced ? p.dims[p.rank - 1] : 1;
  int64_t lenStride = anyReduced ? p.strides[p.rank - 1] : 0;
  int64_t runs = len ? p.redCount / len : 0;
  for (int64_t o = first; o < outCount; o += step) {
    int64_t base = reduceBase(p, o);
    Acc a = 0;
    for (int64_t r = 0; r < runs; ++r) {
      const TIn *run = in + base + reduceOffset(p, r * len);
      for (int64_t l = 0; l < len; ++l)
        a += accTerm<Op>(run[l * lenStride]);
    }
    out[o] = finishAcc<TOut, Op>(a, p.redCount);
  }
}

/// Launches the reduction of `in` to `out` for `choices`, picking the fast
/// kernels where a single plan has the [outer, red, inner] form.
template <typename TIn, typename TOut, ReduceOp Op>
Error launchReduce(const TIn *in, TOut *out, const ReduceChoices &choices,
                   cudaStream_t stream) {
  const ReducePlan &p = choices.plans[0];
  int64_t outer, red, inner;
  if (choices.count == 1 && reduceAsMiddle(p, outer, red, inner)) {
    if (inner == 1) {
      constexpr int threads = 256;
      int64_t blocks = (outer + threads / 32 - 1) / (threads / 32);
      reduceRowsKernel<TIn, TOut, Op>
          <<<rowBlocks(blocks), threads, 0, stream>>>(in, out, outer, red);
      return checkLaunch("reduceRowsKernel");
    }
    // Many rows per output and too few outputs to fill the GPU with one
    // thread each: split the rows over a block.
    if (red >= 4 * kTile && p.outCount < (int64_t(1) << 16)) {
      dim3 grid(static_cast<unsigned>((inner + kTile - 1) / kTile),
                static_cast<unsigned>(std::min<int64_t>(outer, 65535)));
      reduceColumnsKernel<TIn, TOut, Op>
          <<<grid, dim3(kTile, kTile), 0, stream>>>(in, out, outer, red,
                                                    inner);
      return checkLaunch("reduceColumnsKernel");
    }
  }
  constexpr unsigned threads = 256;
  reduceGenericKernel<TIn, TOut, Op>
      <<<gridFor(p.outCount, threads), threads, 0, stream>>>(
          in, out, p.outCount, choices);
  return checkLaunch("reduceGenericKernel");
}

//===----------------------------------------------------------------------===//
// Host checks shared by the kernels
//===----------------------------------------------------------------------===//

Error axisError(int64_t axis, int64_t rank) {
  return cudaKernelError("axis " + Twine(axis) + " is out of range for rank " +
                         Twine(rank));
}

/// Normalises `axis` against `rank` as the cpu kernels do (rank 0 allows
/// axis 0).
llvm::Expected<int64_t> normalizeAxis(int64_t axis, int64_t rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= std::max<int64_t>(rank, 1))
    return axisError(axis, rank);
  return a;
}

bool isKernelFloat(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

llvm::Expected<StatKind> statKind(DType t) {
  switch (t) {
  case DType::F32:
    return StatKind::F32;
  case DType::F16:
    return StatKind::F16;
  case DType::BF16:
    return StatKind::BF16;
  case DType::F64:
    return StatKind::F64;
  default:
    return cudaKernelError("not a float type");
  }
}

/// Threads per row block: enough to cover short rows without idle warps.
unsigned rowThreads(int64_t d) {
  return d >= 2048 ? 256 : d >= 512 ? 128 : 64;
}

/// The affine reading of Scale or B; the cpu kernels' message otherwise.
Error affineOf(const DeviceTensor &t, ArrayRef<int64_t> norm,
               llvm::StringRef op, llvm::StringRef what, AffineIndex &index,
               SmallVectorImpl<bool> &broadcast) {
  if (planAffine(t.shape, norm, index, broadcast))
    return Error::success();
  return cudaKernelError("unsupported: " + op + " with " + what +
                         " of shape " + formatShape(t.shape) +
                         " for normalised shape " + formatShape(norm));
}

/// The plan of summing a float vector over the normalised shape `norm`
/// along `broadcast`: how the column sums become a broadcast Scale's or
/// B's gradient.
Error broadcastSumPlan(ArrayRef<int64_t> norm, ArrayRef<bool> broadcast,
                       ReduceChoices &choices) {
  choices = ReduceChoices();
  if (planReduce(norm, broadcast, choices.plans[0]))
    return Error::success();
  return cudaKernelError("unsupported: LayerNormalizationGrad with a scale "
                         "broadcast over more than " +
                         Twine(kMaxViewRank) + " dimension groups");
}

//===----------------------------------------------------------------------===//
// RmsNorm kernels (zinc.RmsNorm from fuse-rms-norm, over the last axis)
//===----------------------------------------------------------------------===//

/// 1 / sqrt(mean(x^2) + epsilon) of a row, to every thread of the block.
template <typename T>
__device__ float rowInverseRms(const T *row, int64_t d, float epsilon,
                               float *shared) {
  float q = 0;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    float v = loadF(row[j]);
    q += v * v;
  }
  float mean = d ? blockSum(q, shared) / static_cast<float>(d) : 0.0f;
  return 1.0f / sqrtf(mean + epsilon);
}

/// y = x r, one block per row (grid-stride).
template <typename T>
__global__ void rmsNormKernel(const T *__restrict__ x, T *__restrict__ y,
                              int64_t outer, int64_t d, float epsilon) {
  __shared__ float shared[32];
  for (int64_t o = blockIdx.x; o < outer; o += gridDim.x) {
    const T *row = x + o * d;
    float inv = rowInverseRms(row, d, epsilon, shared);
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
      y[o * d + j] = storeF<T>(loadF(row[j]) * inv);
  }
}

/// dx = r (dy - n mean(dy n)) with n = x r, one block per row.
template <typename T>
__global__ void rmsNormGradKernel(const T *__restrict__ x,
                                  const T *__restrict__ dy, T *__restrict__ dx,
                                  int64_t outer, int64_t d, float epsilon) {
  __shared__ float shared[32];
  for (int64_t o = blockIdx.x; o < outer; o += gridDim.x) {
    const T *xr = x + o * d, *gr = dy + o * d;
    float inv = rowInverseRms(xr, d, epsilon, shared);
    float dot = 0;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
      dot += loadF(gr[j]) * (loadF(xr[j]) * inv);
    float meanDot = d ? blockSum(dot, shared) / static_cast<float>(d) : 0.0f;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
      float n = loadF(xr[j]) * inv;
      dx[o * d + j] = storeF<T>(inv * (loadF(gr[j]) - n * meanDot));
    }
  }
}

} // namespace

//===----------------------------------------------------------------------===//
// LayerNormalization
//===----------------------------------------------------------------------===//

Error runLayerNormalization(const CudaKernelCall &call) {
  const DeviceTensor *x = call.input(0), *scale = call.input(1),
                     *bias = call.input(2);
  DeviceTensor *y = call.output(0);
  if (!x || !y)
    return cudaKernelError(call.opType + ": missing input 0 or output 0");
  if (!isFloatDType(x->dtype) || x->dtype != y->dtype)
    return cudaKernelError("unsupported: " + call.opType + " from " +
                           dtypeName(x->dtype) + " to " + dtypeName(y->dtype));
  if (x->shape != y->shape)
    return cudaKernelError(call.opType + ": output shape " +
                           formatShape(y->shape) +
                           " differs from input shape " +
                           formatShape(x->shape));
  if (!scale)
    return cudaKernelError("LayerNormalization: missing input 1 (Scale)");
  int64_t rank = static_cast<int64_t>(x->shape.size());
  auto axisOr = normalizeAxis(call.attrs.getInt("axis", -1), rank);
  if (!axisOr)
    return axisOr.takeError();
  ArrayRef<int64_t> shape = x->shape;
  int64_t axis = std::min<int64_t>(*axisOr, rank);
  ArrayRef<int64_t> norm = shape.drop_front(axis);
  int64_t outer = numElements(shape.take_front(axis));
  int64_t d = numElements(norm);
  float epsilon = static_cast<float>(call.attrs.getFloat("epsilon", 1e-5));
  AffineIndex scaleIdx, biasIdx;
  SmallVector<bool, 8> broadcast;
  if (Error e = affineOf(*scale, norm, call.opType, "Scale", scaleIdx,
                         broadcast))
    return e;
  if (bias)
    if (Error e = affineOf(*bias, norm, call.opType, "B", biasIdx, broadcast))
      return e;
  StatRef stats[2];
  const char *statNames[2] = {"Mean", "InvStdDev"};
  for (int k = 0; k < 2; ++k) {
    DeviceTensor *t = call.output(1 + k);
    if (!t)
      continue;
    auto kind = statKind(t->dtype);
    if (!kind || t->numElements() != outer) {
      if (!kind)
        llvm::consumeError(kind.takeError());
      return cudaKernelError("LayerNormalization: " + Twine(statNames[k]) +
                             " output has shape " + formatShape(t->shape) +
                             " and type " + dtypeName(t->dtype) +
                             ", expected " + Twine(outer) +
                             " float elements");
    }
    stats[k] = {t->data, *kind};
  }
  auto typeError = [&](const DeviceTensor &t, llvm::StringRef what) {
    return cudaKernelError("unsupported: " + call.opType + " with " + what +
                           " of " + dtypeName(t.dtype) + " for x of " +
                           dtypeName(x->dtype) +
                           " on the cuda backend (they must match)");
  };
  if (scale->dtype != x->dtype)
    return typeError(*scale, "Scale");
  if (bias && bias->dtype != x->dtype)
    return typeError(*bias, "B");

  return dispatchFloat(x->dtype, call.opType, [&](auto tag) -> Error {
    using T = decltype(tag);
    if (outer == 0)
      return Error::success();
    layerNormKernel<T><<<rowBlocks(outer), rowThreads(d), 0, call.stream>>>(
        static_cast<const T *>(x->data), static_cast<const T *>(scale->data),
        bias ? static_cast<const T *>(bias->data) : nullptr,
        static_cast<T *>(y->data), outer, d, epsilon, scaleIdx, biasIdx,
        stats[0], stats[1]);
    return checkLaunch("layerNormKernel");
  });
}

/// Inputs (dy, x, scale, [mean, invstd]), outputs (dx, dscale, [dbias]),
/// attributes axis and epsilon, as the cpu kernel. Recomputed statistics
/// (no mean/invstd inputs) and the column sums of a broadcast Scale or B
/// take f32 scratch; the common case (statistics given, Scale of the row's
/// shape) takes none.
Error runLayerNormalizationGrad(const CudaKernelCall &call) {
  const DeviceTensor *dy = call.input(0), *x = call.input(1),
                     *scale = call.input(2), *meanIn = call.input(3),
                     *invStdIn = call.input(4);
  DeviceTensor *dx = call.output(0), *dscale = call.output(1),
               *dbias = call.output(2);
  std::pair<const DeviceTensor *, const char *> same[] = {
      {x, "input 1 (x)"}, {dy, "input 0 (dy)"}, {dx, "output 0 (dx)"}};
  for (const auto &[t, what] : same) {
    if (!t)
      return cudaKernelError(call.opType + ": missing " + what);
    if (!isFloatDType(t->dtype) || t->dtype != x->dtype ||
        t->shape != x->shape)
      return cudaKernelError(call.opType + ": " + what + " is " +
                             dtypeName(t->dtype) + formatShape(t->shape) +
                             ", expected a float tensor like " +
                             dtypeName(x->dtype) +
                             formatShape(x->shape));
  }
  if (!scale || !dscale)
    return cudaKernelError(
        "LayerNormalizationGrad: missing scale or its gradient");
  if (scale->dtype != x->dtype || dscale->dtype != x->dtype ||
      dscale->shape != scale->shape || (dbias && dbias->dtype != x->dtype))
    return cudaKernelError("LayerNormalizationGrad: scale and the scale/bias "
                           "gradients must be " +
                           Twine(dtypeName(x->dtype)) +
                           ", the scale gradient of the scale's shape");
  if (static_cast<bool>(meanIn) != static_cast<bool>(invStdIn))
    return cudaKernelError("LayerNormalizationGrad: mean and invstd must be "
                           "given together");
  int64_t rank = static_cast<int64_t>(x->shape.size());
  auto axisOr = normalizeAxis(call.attrs.getInt("axis", -1), rank);
  if (!axisOr)
    return axisOr.takeError();
  ArrayRef<int64_t> shape = x->shape;
  int64_t axis = std::min<int64_t>(*axisOr, rank);
  ArrayRef<int64_t> norm = shape.drop_front(axis);
  int64_t outer = numElements(shape.take_front(axis));
  int64_t d = numElements(norm);
  float epsilon = static_cast<float>(call.attrs.getFloat("epsilon", 1e-5));
  AffineIndex scaleIdx, biasIdx;
  SmallVector<bool, 8> scaleBroadcast, biasBroadcast;
  if (Error e = affineOf(*scale, norm, call.opType, "Scale", scaleIdx,
                         scaleBroadcast))
    return e;
  if (dbias)
    if (Error e = affineOf(*dbias, norm, call.opType, "B", biasIdx,
                           biasBroadcast))
      return e;
  StatRef meanRef, invStdRef;
  if (meanIn) {
    const DeviceTensor *stats[2] = {meanIn, invStdIn};
    const char *names[2] = {"mean", "invstd"};
    StatRef *refs[2] = {&meanRef, &invStdRef};
    for (int k = 0; k < 2; ++k) {
      auto kind = statKind(stats[k]->dtype);
      if (!kind || stats[k]->numElements() != outer) {
        if (!kind)
          llvm::consumeError(kind.takeError());
        return cudaKernelError(
            "LayerNormalizationGrad: " + Twine(names[k]) + " is " +
            dtypeName(stats[k]->dtype) + formatShape(stats[k]->shape) +
            ", expected " + Twine(outer) + " float elements");
      }
      *refs[k] = {stats[k]->data, *kind};
    }
  }
  // Broadcast Scale / B: their gradients sum the column sums further.
  bool scaleDirect = scaleIdx.direct, biasDirect = !dbias || biasIdx.direct;
  ReduceChoices scaleSum, biasSum;
  if (!scaleDirect)
    if (Error e = broadcastSumPlan(norm, scaleBroadcast, scaleSum))
      return e;
  if (!biasDirect)
    if (Error e = broadcastSumPlan(norm, biasBroadcast, biasSum))
      return e;

  // The statistics the caller gave (null data: the rows kernel recomputes
  // them); meanRef/invStdRef below become what the column kernel reads.
  StatRef meanGiven = meanRef, invStdGiven = invStdRef;
  // Scratch: recomputed statistics, then broadcast column sums.
  float *meanSave = nullptr, *invStdSave = nullptr;
  if (!meanIn && outer > 0 && d > 0) {
    auto m = call.scratch<float>(outer);
    if (!m)
      return m.takeError();
    auto s = call.scratch<float>(outer);
    if (!s)
      return s.takeError();
    meanSave = *m;
    invStdSave = *s;
    meanRef = {meanSave, StatKind::F32};
    invStdRef = {invStdSave, StatKind::F32};
  }
  float *colScale = nullptr, *colBias = nullptr;
  if (!scaleDirect || !biasDirect) {
    auto cs = call.scratch<float>(d);
    if (!cs)
      return cs.takeError();
    colScale = *cs;
    if (dbias) {
      auto cb = call.scratch<float>(d);
      if (!cb)
        return cb.takeError();
      colBias = *cb;
    }
  }

  return dispatchFloat(x->dtype, call.opType, [&](auto tag) -> Error {
    using T = decltype(tag);
    const T *px = static_cast<const T *>(x->data);
    const T *pdy = static_cast<const T *>(dy->data);
    T *pdscale = static_cast<T *>(dscale->data);
    T *pdbias = dbias ? static_cast<T *>(dbias->data) : nullptr;
    if (d == 0) {
      // No columns: the gradients are sums of nothing.
      ZINC_CUDA_TRY(cudaMemsetAsync(pdscale, 0, dscale->byteSize(),
                                    call.stream));
      if (pdbias)
        ZINC_CUDA_TRY(
            cudaMemsetAsync(pdbias, 0, dbias->byteSize(), call.stream));
      return Error::success();
    }
    if (outer > 0) {
      layerNormGradRowsKernel<T>
          <<<rowBlocks(outer), rowThreads(d), 0, call.stream>>>(
              pdy, px, static_cast<const T *>(scale->data),
              static_cast<T *>(dx->data), outer, d, epsilon, scaleIdx,
              meanGiven, invStdGiven, meanSave, invStdSave);
      if (Error e = checkLaunch("layerNormGradRowsKernel"))
        return e;
    }
    dim3 grid(static_cast<unsigned>((d + kTile - 1) / kTile));
    dim3 block(kTile, kTile);
    if (scaleDirect && biasDirect) {
      layerNormGradColumnsKernel<T, T><<<grid, block, 0, call.stream>>>(
          pdy, px, outer, d, meanRef, invStdRef, pdscale, pdbias);
      return checkLaunch("layerNormGradColumnsKernel");
    }
    layerNormGradColumnsKernel<T, float><<<grid, block, 0, call.stream>>>(
        pdy, px, outer, d, meanRef, invStdRef, colScale, colBias);
    if (Error e = checkLaunch("layerNormGradColumnsKernel"))
      return e;
    // Column sums to the gradients' shapes: copies where not broadcast.
    ReduceChoices copy;
    bool none[kMaxViewRank] = {};
    planReduce(norm, ArrayRef<bool>(none, norm.size()), copy.plans[0]);
    if (Error e = launchReduce<float, T, ReduceOp::Sum>(
            colScale, pdscale, scaleDirect ? copy : scaleSum, call.stream))
      return e;
    if (pdbias)
      return launchReduce<float, T, ReduceOp::Sum>(
          colBias, pdbias, biasDirect ? copy : biasSum, call.stream);
    return Error::success();
  });
}

//===----------------------------------------------------------------------===//
// ReduceSum, ReduceMean, ReduceL2
//===----------------------------------------------------------------------===//

template <ReduceOp Op> static Error runReduce(const CudaKernelCall &call) {
  const DeviceTensor *x = call.input(0);
  DeviceTensor *y = call.output(0);
  if (!x || !y)
    return cudaKernelError(call.opType + ": missing input or output");
  if (x->dtype != y->dtype)
    return cudaKernelError(call.opType + ": output element type " +
                           dtypeName(y->dtype) + " differs from input " +
                           dtypeName(x->dtype));
  DType dtype = x->dtype;
  if (Op == ReduceOp::L2 && !isKernelFloat(dtype))
    return cudaKernelError("unsupported: " + call.opType + " of " + dtypeName(dtype) +
                           " on the cuda backend (f32, f16, bf16)");
  if (!isKernelFloat(dtype) && dtype != DType::I32 && dtype != DType::I64)
    return cudaKernelError("unsupported: " + call.opType + " of " +
                           dtypeName(dtype) +
                           " on the cuda backend (f32, f16, bf16, i32, i64)");
  ReduceChoices choices;
  bool done;
  if (Error e = planReduceChoices(
          call, /*readHostAxes=*/false, choices, done,
          [&](const ReducePlan &plan) -> Error {
            if (Op == ReduceOp::Mean && !isKernelFloat(dtype) && plan.redCount == 0)
              return cudaKernelError(call.opType +
                                     ": integer mean of no elements");
            return Error::success();
          }))
    return e;
  if (done)
    return Error::success();
  if (y->numElements() == 0)
    return Error::success();

  auto launch = [&](auto tag) -> Error {
    using T = decltype(tag);
    return launchReduce<T, T, Op>(static_cast<const T *>(x->data),
                                    static_cast<T *>(y->data), choices,
                                    call.stream);
  };
  if (dtype == DType::I32)
    return launch(int32_t{});
  if (dtype == DType::I64)
    return launch(int64_t{});
  return dispatchFloat(dtype, call.opType, launch);
}

Error runReduceSum(const CudaKernelCall &call) {
  return runReduce<ReduceOp::Sum>(call);
}
Error runReduceMean(const CudaKernelCall &call) {
  return runReduce<ReduceOp::Mean>(call);
}
Error runReduceL2(const CudaKernelCall &call) {
  return runReduce<ReduceOp::L2>(call);
}

/// RmsNorm(x) -> y and RmsNormGrad(x, dy) -> dx: every operand of x's
/// float type and shape.
static Error checkRmsNorm(const CudaKernelCall &call, size_t inputs) {
  const DeviceTensor *x = call.input(0), *y = call.output(0);
  if (!x || !y || (inputs > 1 && !call.input(1)))
    return cudaKernelError(call.opType + ": missing an operand");
  for (const DeviceTensor *t : {call.input(inputs - 1), y})
    if (t->dtype != x->dtype || t->shape != x->shape)
      return cudaKernelError(call.opType + ": operands differ in type or shape");
  if (x->shape.empty())
    return cudaKernelError(call.opType + ": x must have rank >= 1");
  return Error::success();
}

Error runRmsNorm(const CudaKernelCall &call) {
  if (Error e = checkRmsNorm(call, 1))
    return e;
  const DeviceTensor &x = *call.input(0);
  DeviceTensor &y = *call.output(0);
  int64_t d = x.shape.back(), outer = d ? x.numElements() / d : 0;
  float epsilon = static_cast<float>(call.attrs.getFloat("epsilon", 1e-6));
  return dispatchFloat(x.dtype, call.opType, [&](auto tag) -> Error {
    using T = decltype(tag);
    if (outer == 0)
      return Error::success();
    rmsNormKernel<T><<<rowBlocks(outer), rowThreads(d), 0, call.stream>>>(
        static_cast<const T *>(x.data), static_cast<T *>(y.data), outer, d,
        epsilon);
    return checkLaunch("rmsNormKernel");
  });
}

Error runRmsNormGrad(const CudaKernelCall &call) {
  if (Error e = checkRmsNorm(call, 2))
    return e;
  const DeviceTensor &x = *call.input(0), &dy = *call.input(1);
  DeviceTensor &dx = *call.output(0);
  int64_t d = x.shape.back(), outer = d ? x.numElements() / d : 0;
  float epsilon = static_cast<float>(call.attrs.getFloat("epsilon", 1e-6));
  return dispatchFloat(x.dtype, call.opType, [&](auto tag) -> Error {
    using T = decltype(tag);
    if (outer == 0)
      return Error::success();
    rmsNormGradKernel<T><<<rowBlocks(outer), rowThreads(d), 0, call.stream>>>(
        static_cast<const T *>(x.data), static_cast<const T *>(dy.data),
        static_cast<T *>(dx.data), outer, d, epsilon);
    return checkLaunch("rmsNormGradKernel");
  });
}

} // namespace zinc::cuda
