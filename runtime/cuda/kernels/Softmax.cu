//===- Softmax.cu - Softmax family and SoftmaxCrossEntropyLoss kernels ----===//
//
// Every kernel here normalises rows of an [outer, d, inner] view (see
// SoftmaxMath.h): a warp per short contiguous row, a block per long one,
// and for strided rows (inner > 1) 8 threads per row with 32 rows side by
// side, so loads coalesce along inner. Maxima are float, row sums double
// (as the cpu kernels keep a long row's digits), the elementwise math float,
// rounded once on store. Reductions are trees of fixed shape, so results do
// not change from run to run.
//
// What the cpu checks by reading tensor values (a target out of range) the
// GPU cannot check without waiting for the device: such a position's loss
// and gradient are NaN instead of an error. Everything else the cpu refuses
// is refused here with the cpu's message, before anything is queued.
//
//===----------------------------------------------------------------------===//
#include "BlockReduce.cuh"
#include "CudaKernels.h"
#include "DeviceTypes.cuh"
#include "SoftmaxMath.h"
#include "zinc/runtime/cuda/CudaCheck.h"
#include "zinc/support/DType.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/Twine.h"
#include <cstdint>
#include <type_traits>

namespace zinc::cuda {
namespace {

/// Shared memory of every kernel here: the column layout's 8 x 32 partial
/// values, which also covers a 1024-thread block's 32 warps.
constexpr int kSharedDoubles = kColumnRows * kColumnThreads;
constexpr unsigned kFullMask = 0xffffffffu;

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

/// Butterfly reductions (warpSum is BlockReduce.cuh's): every lane ends
/// with the same bits, since each step combines the same two values.
__device__ __forceinline__ float warpMax(float v) {
  for (int m = 16; m > 0; m >>= 1)
    v = fmaxf(v, __shfl_xor_sync(kFullMask, v, m));
  return v;
}

/// Sum over the whole block, every thread getting the result; warps are
/// combined in order, so the bits depend only on the block shape. Every
/// thread of the block must call it.
__device__ double blockSum(double v, double *smem) {
  int tid = threadIdx.x + threadIdx.y * blockDim.x;
  int warps = (blockDim.x * blockDim.y) / 32;
  v = warpSum(v);
  __syncthreads();
  if (tid % 32 == 0)
    smem[tid / 32] = v;
  __syncthreads();
  double total = smem[0];
  for (int w = 1; w < warps; ++w)
    total += smem[w];
  __syncthreads();
  return total;
}

/// The threads that share one row: `lane` of kWidth, with max and sum over
/// them. A team's reductions must be reached by all of its threads, active
/// or not.
struct WarpTeam {
  static constexpr int kWidth = 32;
  int lane;
  __device__ float max(float v) const { return warpMax(v); }
  __device__ double sum(double v) const { return warpSum(v); }
};

template <int kThreads> struct BlockTeam {
  static constexpr int kWidth = kThreads;
  static constexpr int kWarps = kThreads / 32;
  int lane;
  double *smem;
  __device__ float max(float v) const {
    v = warpMax(v);
    if (lane % 32 == 0)
      smem[lane / 32] = v;
    __syncthreads();
    float m = static_cast<float>(smem[0]);
    for (int w = 1; w < kWarps; ++w)
      m = fmaxf(m, static_cast<float>(smem[w]));
    __syncthreads();
    return m;
  }
  __device__ double sum(double v) const {
    v = warpSum(v);
    if (lane % 32 == 0)
      smem[lane / 32] = v;
    __syncthreads();
    double s = smem[0];
    for (int w = 1; w < kWarps; ++w)
      s += smem[w];
    __syncthreads();
    return s;
  }
};

/// threadIdx.y is the lane, threadIdx.x the row among 32 side by side.
struct ColumnTeam {
  static constexpr int kWidth = kColumnThreads;
  int lane, column;
  double *smem;
  __device__ float max(float v) const {
    smem[lane * kColumnRows + column] = v;
    __syncthreads();
    float m = static_cast<float>(smem[column]);
    for (int y = 1; y < kColumnThreads; ++y)
      m = fmaxf(m, static_cast<float>(smem[y * kColumnRows + column]));
    __syncthreads();
    return m;
  }
  __device__ double sum(double v) const {
    smem[lane * kColumnRows + column] = v;
    __syncthreads();
    double s = smem[column];
    for (int y = 1; y < kColumnThreads; ++y)
      s += smem[y * kColumnRows + column];
    __syncthreads();
    return s;
  }
};

/// Calls op.row(team, r, base, stride, active) for every row r this thread
/// helps with; base and stride locate the row's elements. Loop trip counts
/// are uniform wherever a team spans warps, so its barriers line up.
template <RowLayoutKind L, typename Op>
__device__ void forEachRow(Op &op, const SoftmaxRows &g, double *smem) {
  int64_t rows = g.rows();
  if constexpr (L == RowLayoutKind::Warp) {
    WarpTeam team{static_cast<int>(threadIdx.x % 32)};
    int64_t teams = int64_t(gridDim.x) * kWarpsPerBlock;
    for (int64_t r = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
         r < rows; r += teams)
      op.row(team, r, r * g.d, 1, true);
  } else if constexpr (L == RowLayoutKind::Column) {
    ColumnTeam team{static_cast<int>(threadIdx.y),
                    static_cast<int>(threadIdx.x), smem};
    int64_t perOuter = (g.inner + kColumnRows - 1) / kColumnRows;
    for (int64_t tile = blockIdx.x; tile < g.outer * perOuter;
         tile += gridDim.x) {
      int64_t o = tile / perOuter;
      int64_t i = (tile % perOuter) * kColumnRows + threadIdx.x;
      op.row(team, o * g.inner + i, o * g.d * g.inner + i, g.inner,
             i < g.inner);
    }
  } else {
    BlockTeam<rowLayoutThreads(L)> team{static_cast<int>(threadIdx.x), smem};
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x)
      op.row(team, r, r * g.d, 1, true);
  }
}

//===----------------------------------------------------------------------===//
// Row ops
//===----------------------------------------------------------------------===//

/// The row's maximum of f(j) over active lanes, reduced over the team.
template <typename Team, typename F>
__device__ float teamMax(const Team &team, int64_t d, bool active, F f) {
  float m = -INFINITY;
  if (active)
    for (int64_t j = team.lane; j < d; j += Team::kWidth)
      m = fmaxf(m, f(j));
  return team.max(m);
}

template <typename Team, typename F>
__device__ double teamSum(const Team &team, int64_t d, bool active, F f) {
  double s = 0;
  if (active)
    for (int64_t j = team.lane; j < d; j += Team::kWidth)
      s += f(j);
  return team.sum(s);
}

/// Softmax and LogSoftmax. x and y may be one buffer: each element is read
/// and then written by one thread, after the row's reductions.
template <typename T, bool isLog> struct SoftmaxOp {
  const T *x;
  T *y;
  int64_t d;

  template <typename Team>
  __device__ void row(const Team &team, int64_t, int64_t base, int64_t stride,
                      bool active) {
    auto at = [&](int64_t j) { return loadF(x[base + j * stride]); };
    float m = teamMax(team, d, active, at);
    double s = teamSum(team, d, active,
                       [&](int64_t j) { return double(expf(at(j) - m)); });
    if (!active)
      return;
    if constexpr (isLog) {
      float logSum = static_cast<float>(log(s));
      for (int64_t j = team.lane; j < d; j += Team::kWidth)
        y[base + j * stride] = storeF<T>(logSoftmaxValue(at(j), m, logSum));
    } else {
      float inv = static_cast<float>(1.0 / s);
      for (int64_t j = team.lane; j < d; j += Team::kWidth)
        y[base + j * stride] = storeF<T>(softmaxValue(at(j), m, inv));
    }
  }
};

/// MaskedSoftmax over the last axis; mask row r % maskRows (bytes, nonzero
/// = masked).
template <typename T> struct MaskedSoftmaxOp {
  const T *x;
  const uint8_t *mask;
  T *y;
  int64_t d, maskRows;

  template <typename Team>
  __device__ void row(const Team &team, int64_t r, int64_t base, int64_t,
                      bool active) {
    // The cpu's 16-bit path leaves masked positions out of the sum and
    // writes them as 0; its f32 path is a softmax of the -inf scores.
    constexpr bool zeroMasked = !std::is_same_v<T, float>;
    const uint8_t *m = mask + maskRowOf(r, maskRows) * d;
    auto score = [&](int64_t j) {
      return maskedScore(loadF(x[base + j]), m[j] != 0);
    };
    float mx = teamMax(team, d, active, score);
    double s = teamSum(team, d, active, [&](int64_t j) {
      return zeroMasked && m[j] ? 0.0 : double(expf(score(j) - mx));
    });
    if (!active)
      return;
    float inv = static_cast<float>(1.0 / s);
    for (int64_t j = team.lane; j < d; j += Team::kWidth)
      y[base + j] = storeF<T>(maskedSoftmaxValue(loadF(x[base + j]), m[j] != 0,
                                                 mx, inv, zeroMasked));
  }
};

/// SoftmaxGrad and LogSoftmaxGrad.
template <typename T, bool isLog> struct SoftmaxGradOp {
  const T *y, *dy;
  T *dx;
  int64_t d;

  template <typename Team>
  __device__ void row(const Team &team, int64_t, int64_t base, int64_t stride,
                      bool active) {
    double s = teamSum(team, d, active, [&](int64_t j) {
      int64_t k = base + j * stride;
      return softmaxGradTerm(loadF(y[k]), loadF(dy[k]), isLog);
    });
    if (!active)
      return;
    float sf = static_cast<float>(s);
    for (int64_t j = team.lane; j < d; j += Team::kWidth) {
      int64_t k = base + j * stride;
      dx[k] = storeF<T>(softmaxGradValue(loadF(y[k]), loadF(dy[k]), sf, isLog));
    }
  }
};

/// What the loss kernels read from the attributes.
struct LossAttrs {
  bool hasIgnoreIndex;
  int64_t ignoreIndex;
};

/// SoftmaxCrossEntropyLoss over the positions r = (n, d1..dk) of an
/// [N, C, D] input: log_prob (when wanted), the per-position loss (reduction
/// none) or the team leader's running sums of loss and weight.
template <typename T, typename Tgt> struct SceOp {
  const T *x;
  const Tgt *target;
  const T *weight; // null: every class weighs 1
  T *logProb;      // null: not wanted
  T *perPosition;  // null unless reduction is none
  int64_t classes;
  LossAttrs attrs;
  double lossSum = 0, weightSum = 0;

  template <typename Team>
  __device__ void row(const Team &team, int64_t r, int64_t base, int64_t stride,
                      bool active) {
    auto at = [&](int64_t c) { return loadF(x[base + c * stride]); };
    float m = teamMax(team, classes, active, at);
    double s = teamSum(team, classes, active,
                       [&](int64_t c) { return double(expf(at(c) - m)); });
    if (!active)
      return;
    float lse = logSumExp(m, s);
    if (logProb)
      for (int64_t c = team.lane; c < classes; c += Team::kWidth)
        logProb[base + c * stride] = storeF<T>(at(c) - lse);
    if (team.lane != 0)
      return;
    int64_t t = static_cast<int64_t>(target[r]);
    float l = 0, w = 0;
    switch (classifyTarget(t, classes, attrs.hasIgnoreIndex,
                           attrs.ignoreIndex)) {
    case TargetKind::Ignored:
      break;
    case TargetKind::OutOfRange:
      l = w = NAN;
      break;
    case TargetKind::Class:
      w = weight ? loadF(weight[t]) : 1.0f;
      l = sceLoss(at(t), lse, w);
      break;
    }
    if (perPosition)
      perPosition[r] = storeF<T>(l);
    lossSum += l;
    weightSum += w;
  }
};

/// Softmax cross-entropy rows; with `partials`, then this block's sums of
/// loss and weight (one block: the reduced loss itself, into `loss`).
template <RowLayoutKind L, typename T, typename Tgt>
__global__ void __launch_bounds__(rowLayoutThreads(L))
    sceLossKernel(SceOp<T, Tgt> op, SoftmaxRows g, bool reduce, bool mean,
                  double *partials, T *loss) {
  __shared__ double smem[kSharedDoubles];
  forEachRow<L>(op, g, smem);
  if (!reduce)
    return;
  double l = blockSum(op.lossSum, smem);
  double w = blockSum(op.weightSum, smem);
  if (threadIdx.x != 0 || threadIdx.y != 0)
    return;
  if (gridDim.x == 1) {
    loss[0] = storeF<T>(static_cast<float>(mean ? l / w : l));
    return;
  }
  partials[2 * blockIdx.x] = l;
  partials[2 * blockIdx.x + 1] = w;
}

/// Adds the blocks' partial sums in a fixed order. Mean divides by the
/// total weight of the non-ignored positions; all ignored is 0/0 = NaN,
/// as on the cpu and in PyTorch.
template <typename T>
__global__ void __launch_bounds__(256)
    sceFinishKernel(const double *partials, int64_t blocks, bool mean,
                    T *loss) {
  __shared__ double smem[kSharedDoubles];
  double l = 0, w = 0;
  for (int64_t b = threadIdx.x; b < blocks; b += blockDim.x) {
    l += partials[2 * b];
    w += partials[2 * b + 1];
  }
  l = blockSum(l, smem);
  w = blockSum(w, smem);
  if (threadIdx.x == 0)
    loss[0] = storeF<T>(static_cast<float>(mean ? l / w : l));
}

/// SoftmaxCrossEntropyLossGrad over the positions of [N, C, D]:
///   dscores = G + a * onehot(t) - softmax * (sum_c G + a).
template <typename T, typename Tgt> struct SceGradOp {
  const T *x;      // scores, or log_prob when isLogProb
  const T *gIn;    // dlog_prob, or null
  const T *dloss;  // one element, or one per position (reduction none)
  const Tgt *target;
  const T *weight; // null: every class weighs 1
  T *dx;
  int64_t classes;
  LossAttrs attrs;
  bool isLogProb, reduceNone, mean;
  /// The mean's denominator, computed by each block before its rows.
  double den = 1;

  template <typename Team>
  __device__ void row(const Team &team, int64_t r, int64_t base, int64_t stride,
                      bool active) {
    auto at = [&](int64_t c) { return loadF(x[base + c * stride]); };
    // Inactive column lanes have no target to read.
    int64_t t = active ? static_cast<int64_t>(target[r]) : 0;
    TargetKind kind = active ? classifyTarget(t, classes, attrs.hasIgnoreIndex,
                                              attrs.ignoreIndex)
                             : TargetKind::Ignored;
    double coef = 0;
    if (kind == TargetKind::Class)
      coef = sceCoefficient(loadF(dloss[reduceNone ? r : 0]),
                            weight ? loadF(weight[t]) : 1.0, mean ? den : 1.0);
    else if (kind == TargetKind::OutOfRange)
      coef = NAN;
    double lse = 0;
    if (!isLogProb) {
      float m = teamMax(team, classes, active, at);
      double s = teamSum(team, classes, active,
                         [&](int64_t c) { return double(expf(at(c) - m)); });
      lse = double(m) + log(s);
    }
    double sumG = coef;
    if (gIn)
      sumG += teamSum(team, classes, active, [&](int64_t c) {
        return double(loadF(gIn[base + c * stride]));
      });
    if (!active)
      return;
    float lsef = static_cast<float>(lse), sumGf = static_cast<float>(sumG);
    float coeff = static_cast<float>(coef);
    for (int64_t c = team.lane; c < classes; c += Team::kWidth) {
      int64_t k = base + c * stride;
      float g = gIn ? loadF(gIn[k]) : 0.0f;
      dx[k] = storeF<T>(sceGradValue(at(c), lsef, sumGf, g, gIn != nullptr,
                                     coeff,
                                     kind == TargetKind::Class && c == t));
    }
  }
};

/// The total weight of the non-ignored targets, every thread of the block
/// getting the same bits (the same order in every block).
template <typename T, typename Tgt>
__device__ double meanDenominator(const SceGradOp<T, Tgt> &op,
                                  int64_t positions, double *smem) {
  int tid = threadIdx.x + threadIdx.y * blockDim.x;
  int threads = blockDim.x * blockDim.y;
  double s = 0;
  for (int64_t i = tid; i < positions; i += threads) {
    int64_t t = static_cast<int64_t>(op.target[i]);
    switch (classifyTarget(t, op.classes, op.attrs.hasIgnoreIndex,
                           op.attrs.ignoreIndex)) {
    case TargetKind::Ignored:
      break;
    case TargetKind::OutOfRange:
      s += NAN;
      break;
    case TargetKind::Class:
      s += op.weight ? double(loadF(op.weight[t])) : 1.0;
      break;
    }
  }
  return blockSum(s, smem);
}

template <RowLayoutKind L, typename Op>
__global__ void __launch_bounds__(rowLayoutThreads(L))
    rowsKernel(Op op, SoftmaxRows g) {
  __shared__ double smem[kSharedDoubles];
  forEachRow<L>(op, g, smem);
}

template <RowLayoutKind L, typename T, typename Tgt>
__global__ void __launch_bounds__(rowLayoutThreads(L))
    sceGradKernel(SceGradOp<T, Tgt> op, SoftmaxRows g) {
  __shared__ double smem[kSharedDoubles];
  if (op.mean)
    op.den = meanDenominator(op, g.rows(), smem);
  forEachRow<L>(op, g, smem);
}

} // namespace

//===----------------------------------------------------------------------===//
// Host side
//===----------------------------------------------------------------------===//

template <RowLayoutKind L>
using LayoutTag = std::integral_constant<RowLayoutKind, L>;

/// Calls fn(LayoutTag<k>{}), so a kernel template can be picked at run time.
template <typename Fn> static void withLayout(RowLayoutKind k, Fn &&fn) {
  switch (k) {
  case RowLayoutKind::Warp:
    return fn(LayoutTag<RowLayoutKind::Warp>{});
  case RowLayoutKind::Block256:
    return fn(LayoutTag<RowLayoutKind::Block256>{});
  case RowLayoutKind::Block1024:
    return fn(LayoutTag<RowLayoutKind::Block1024>{});
  case RowLayoutKind::Column:
    return fn(LayoutTag<RowLayoutKind::Column>{});
  }
}

static dim3 blockShape(RowLayoutKind k) {
  return k == RowLayoutKind::Column ? dim3(kColumnRows, kColumnThreads)
                                    : dim3(rowLayoutThreads(k));
}

/// Queues `op` over the rows of `g` and checks the launch.
template <typename Op>
static llvm::Error launchRows(const Op &op, const SoftmaxRows &g,
                              cudaStream_t stream, const llvm::Twine &name) {
  RowLayoutKind k = chooseRowLayout(g.d, g.inner);
  unsigned grid = static_cast<unsigned>(rowBlocks(k, g));
  withLayout(k, [&](auto tag) {
    rowsKernel<decltype(tag)::value, Op>
        <<<grid, blockShape(k), 0, stream>>>(op, g);
  });
  return checkLaunch(name);
}

/// How launch errors name the kernel: "Softmax kernel (f16)".
static std::string kernelName(const CudaKernelCall &call, DType t) {
  return (call.opType + " kernel (" + dtypeName(t) + ")").str();
}

static SoftmaxRows rowsOf(int64_t outer, int64_t d, int64_t inner) {
  SoftmaxRows g;
  g.outer = outer;
  g.d = d;
  g.inner = inner;
  return g;
}

/// The softmax view of `shape`, or the cpu's error for a bad axis.
static llvm::Expected<SoftmaxRows> geometryOf(llvm::ArrayRef<int64_t> shape,
                                              int64_t axis, bool flatten) {
  SoftmaxRows g;
  int64_t rank = static_cast<int64_t>(shape.size());
  if (!softmaxRows(shape.data(), rank, axis, flatten, g))
    return cudaKernelError("axis " + llvm::Twine(axis) +
                           " is out of range for rank " + llvm::Twine(rank));
  return g;
}

static llvm::Error nullPointer(const CudaKernelCall &call) {
  return cudaKernelError(call.opType + ": null device pointer");
}

//===----------------------------------------------------------------------===//
// Softmax and LogSoftmax
//===----------------------------------------------------------------------===//

/// Before opset 13 the input is flattened to 2-D at `axis` (default 1) and
/// normalised over the whole second dimension; from 13 only along `axis`
/// (default -1).
template <bool isLog>
static llvm::Error runSoftmaxFamily(const CudaKernelCall &call) {
  const DeviceTensor *x = call.input(0);
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
  bool flatten = call.opsetVersion < 13;
  auto g =
      geometryOf(x->shape, call.attrs.getInt("axis", flatten ? 1 : -1), flatten);
  if (!g)
    return g.takeError();
  return dispatchFloat(x->dtype, call.opType, [&](auto tag) -> llvm::Error {
    using T = decltype(tag);
    if (g->elements() == 0)
      return llvm::Error::success();
    if (!x->data || !y->data)
      return nullPointer(call);
    SoftmaxOp<T, isLog> op{static_cast<const T *>(x->data),
                           static_cast<T *>(y->data), g->d};
    return launchRows(op, *g, call.stream, kernelName(call, x->dtype));
  });
}

llvm::Error runSoftmax(const CudaKernelCall &call) {
  return runSoftmaxFamily<false>(call);
}
llvm::Error runLogSoftmax(const CudaKernelCall &call) {
  return runSoftmaxFamily<true>(call);
}

//===----------------------------------------------------------------------===//
// MaskedSoftmax
//===----------------------------------------------------------------------===//

/// softmax(where(mask, -inf, x)) over the last axis; the bool mask
/// broadcasts to x through leading axes only.
llvm::Error runMaskedSoftmax(const CudaKernelCall &call) {
  const DeviceTensor *x = call.input(0), *mask = call.input(1);
  DeviceTensor *y = call.output(0);
  if (!x || !mask || !y)
    return cudaKernelError(
        "MaskedSoftmax: expects inputs (x, mask) and an output");
  if (mask->dtype != DType::Bool || !isFloatDType(x->dtype) ||
      y->dtype != x->dtype || y->shape != x->shape)
    return cudaKernelError(
        "MaskedSoftmax: x and y must be one float type and "
        "shape, the mask bool; got " +
        dtypeName(x->dtype) + formatShape(x->shape) + ", " +
        dtypeName(mask->dtype) + formatShape(mask->shape) + " -> " +
        dtypeName(y->dtype) + formatShape(y->shape));
  int64_t d = x->shape.empty() ? 1 : x->shape.back();
  int64_t n = x->numElements(), maskN = mask->numElements();
  if (d == 0 || n == 0)
    return llvm::Error::success();
  if (mask->shape.empty() || mask->shape.back() != d || maskN == 0 ||
      n % maskN != 0)
    return cudaKernelError("unsupported: MaskedSoftmax with mask " +
                           formatShape(mask->shape) + " for scores " +
                           formatShape(x->shape) +
                           " (the mask must broadcast through leading axes)");
  return dispatchFloat(x->dtype, call.opType, [&](auto tag) -> llvm::Error {
    using T = decltype(tag);
    if (!x->data || !mask->data || !y->data)
      return nullPointer(call);
    MaskedSoftmaxOp<T> op{static_cast<const T *>(x->data),
                          static_cast<const uint8_t *>(mask->data),
                          static_cast<T *>(y->data), d, maskN / d};
    return launchRows(op, rowsOf(n / d, d, 1), call.stream,
                      kernelName(call, x->dtype));
  });
}

//===----------------------------------------------------------------------===//
// SoftmaxGrad and LogSoftmaxGrad
//===----------------------------------------------------------------------===//

/// Inputs (y, dy), output dx; attributes `axis` and `flatten` (1: the
/// opset < 13 form, normalised over all axes from `axis`).
template <bool isLog>
static llvm::Error runSoftmaxGradFamily(const CudaKernelCall &call) {
  const DeviceTensor *y = call.input(0), *dy = call.input(1);
  DeviceTensor *dx = call.output(0);
  const std::pair<const DeviceTensor *, const char *> tensors[] = {
      {y, "input 0 (y)"}, {dy, "input 1 (dy)"}, {dx, "output 0 (dx)"}};
  for (const auto &[t, what] : tensors) {
    if (!t)
      return cudaKernelError(call.opType + ": missing " + what);
    if (!isFloatDType(t->dtype) || t->dtype != y->dtype ||
        t->shape != y->shape)
      return cudaKernelError(call.opType + ": " + what + " is " +
                             dtypeName(t->dtype) + formatShape(t->shape) +
                             ", expected a float tensor like " +
                             dtypeName(y->dtype) + formatShape(y->shape));
  }
  bool flatten = call.attrs.getInt("flatten", 0) != 0;
  auto g =
      geometryOf(y->shape, call.attrs.getInt("axis", flatten ? 1 : -1), flatten);
  if (!g)
    return g.takeError();
  return dispatchFloat(y->dtype, call.opType, [&](auto tag) -> llvm::Error {
    using T = decltype(tag);
    if (g->elements() == 0)
      return llvm::Error::success();
    if (!y->data || !dy->data || !dx->data)
      return nullPointer(call);
    SoftmaxGradOp<T, isLog> op{static_cast<const T *>(y->data),
                               static_cast<const T *>(dy->data),
                               static_cast<T *>(dx->data), g->d};
    return launchRows(op, *g, call.stream, kernelName(call, y->dtype));
  });
}

llvm::Error runSoftmaxGrad(const CudaKernelCall &call) {
  return runSoftmaxGradFamily<false>(call);
}
llvm::Error runLogSoftmaxGrad(const CudaKernelCall &call) {
  return runSoftmaxGradFamily<true>(call);
}

//===----------------------------------------------------------------------===//
// SoftmaxCrossEntropyLoss
//===----------------------------------------------------------------------===//

namespace {
enum class ReductionKind { None, Sum, Mean };
} // namespace

static llvm::Expected<ReductionKind> readReduction(const CudaKernelCall &call) {
  llvm::StringRef red = call.attrs.getString("reduction", "mean");
  if (red == "none")
    return ReductionKind::None;
  if (red == "sum")
    return ReductionKind::Sum;
  if (red == "mean")
    return ReductionKind::Mean;
  return cudaKernelError(call.opType + ": unknown reduction '" + red + "'");
}

static LossAttrs readLossAttrs(const CudaKernelCall &call) {
  return {call.attrs.has("ignore_index"), call.attrs.getInt("ignore_index", 0)};
}

/// The target's shape is the input's without the class dimension.
static bool targetMatches(const DeviceTensor &target,
                          llvm::ArrayRef<int64_t> input) {
  llvm::SmallVector<int64_t, 6> tshape(input.begin(), input.end());
  tshape.erase(tshape.begin() + 1);
  return llvm::ArrayRef<int64_t>(target.shape) ==
         llvm::ArrayRef<int64_t>(tshape);
}

static bool isIndexType(DType t) { return t == DType::I32 || t == DType::I64; }

/// The [N, C, D] view of a loss input: C is the row, D the stride.
static SoftmaxRows lossRows(llvm::ArrayRef<int64_t> shape) {
  int64_t d = 1;
  for (int64_t s : shape.drop_front(2))
    d *= s;
  return rowsOf(shape[0], shape[1], d);
}

/// Calls fn(Tgt{}) for an int32 or int64 target.
template <typename Fn> static llvm::Error withTargetType(DType t, Fn &&fn) {
  if (t == DType::I64)
    return fn(int64_t{});
  return fn(int32_t{});
}

template <typename T, typename Tgt>
static llvm::Error launchLoss(const CudaKernelCall &call, const SceOp<T, Tgt> &op,
                              const SoftmaxRows &g, ReductionKind red,
                              T *loss) {
  RowLayoutKind k = chooseRowLayout(g.d, g.inner);
  bool reduce = red != ReductionKind::None, mean = red == ReductionKind::Mean;
  int64_t blocks = reduce ? lossPartialBlocks(k, g) : rowBlocks(k, g);
  double *partials = nullptr;
  // Without scratch laid out for the call, one block does it all.
  if (reduce && blocks > 1 && call.workspaceBytes == 0)
    blocks = 1;
  if (reduce && blocks > 1) {
    auto s = call.scratch<double>(2 * blocks);
    if (!s)
      return s.takeError();
    partials = *s;
  }
  withLayout(k, [&](auto tag) {
    sceLossKernel<decltype(tag)::value, T, Tgt>
        <<<static_cast<unsigned>(blocks), blockShape(k), 0, call.stream>>>(
            op, g, reduce, mean, partials, loss);
  });
  if (llvm::Error err = checkLaunch(kernelName(call, call.input(0)->dtype)))
    return err;
  if (!partials)
    return llvm::Error::success();
  sceFinishKernel<T><<<1, 256, 0, call.stream>>>(partials, blocks, mean, loss);
  return checkLaunch(call.opType + " reduction kernel");
}

/// Inputs (scores [N, C, d1..dk], target, [weight]); outputs (loss,
/// [log_prob]); attributes reduction and ignore_index.
llvm::Error runSoftmaxCrossEntropyLoss(const CudaKernelCall &call) {
  auto red = readReduction(call);
  if (!red)
    return red.takeError();
  LossAttrs attrs = readLossAttrs(call);
  const DeviceTensor *in = call.input(0), *target = call.input(1),
                     *weight = call.input(2);
  DeviceTensor *loss = call.output(0), *logProb = call.output(1);
  const llvm::StringRef op = call.opType;
  if (!in || !target || !loss)
    return cudaKernelError(op + ": needs input, target and a loss output");
  if (!isFloatDType(in->dtype))
    return cudaKernelError("unsupported: " + op + " on " +
                           dtypeName(in->dtype) + " input");
  if (!isIndexType(target->dtype))
    return cudaKernelError(op + ": target must be int32 or int64, not " +
                           dtypeName(target->dtype));
  if (in->shape.size() < 2)
    return cudaKernelError(op + ": input must be [N, C, ...], it is " +
                           formatShape(in->shape));
  if (!targetMatches(*target, in->shape))
    return cudaKernelError(op + ": target shape " + formatShape(target->shape) +
                           " does not match input shape " +
                           formatShape(in->shape));
  SoftmaxRows g = lossRows(in->shape);
  if (weight && (weight->dtype != in->dtype || weight->shape.size() != 1 ||
                 weight->shape[0] != g.d))
    return cudaKernelError(op + ": weight must be a [" + llvm::Twine(g.d) +
                           "] " + dtypeName(in->dtype) + " tensor, it is " +
                           dtypeName(weight->dtype) +
                           formatShape(weight->shape));
  int64_t lossCount =
      *red == ReductionKind::None ? target->numElements() : 1;
  if (loss->dtype != in->dtype || loss->numElements() != lossCount)
    return cudaKernelError(op + ": loss output must hold " +
                           llvm::Twine(lossCount) + " " + dtypeName(in->dtype) +
                           " elements, it is " + dtypeName(loss->dtype) +
                           formatShape(loss->shape));
  if (logProb && (logProb->dtype != in->dtype || logProb->shape != in->shape))
    return cudaKernelError(op +
                           ": log_prob output must match the input, "
                           "it is " +
                           dtypeName(logProb->dtype) +
                           formatShape(logProb->shape));

  return dispatchFloat(in->dtype, op, [&](auto tag) -> llvm::Error {
    using T = decltype(tag);
    // No positions: nothing to write unless a reduced loss (0, or 0/0).
    if (g.rows() == 0 && *red == ReductionKind::None)
      return llvm::Error::success();
    if (!in->data || !loss->data ||
        (g.rows() > 0 && !target->data) ||
        (weight && g.d > 0 && !weight->data) ||
        (logProb && g.elements() > 0 && !logProb->data))
      return nullPointer(call);
    return withTargetType(target->dtype, [&](auto tgtTag) -> llvm::Error {
      using Tgt = decltype(tgtTag);
      SceOp<T, Tgt> sce{static_cast<const T *>(in->data),
                        static_cast<const Tgt *>(target->data),
                        weight ? static_cast<const T *>(weight->data) : nullptr,
                        logProb ? static_cast<T *>(logProb->data) : nullptr,
                        *red == ReductionKind::None
                            ? static_cast<T *>(loss->data)
                            : nullptr,
                        g.d,
                        attrs};
      return launchLoss(call, sce, g, *red, static_cast<T *>(loss->data));
    });
  });
}

//===----------------------------------------------------------------------===//
// SoftmaxCrossEntropyLossGrad
//===----------------------------------------------------------------------===//

/// Inputs (dloss, log_prob or scores, target, [weight], [dlog_prob]),
/// output dscores; attributes log_prob (1: input 1 is log_prob, 0: the
/// scores, whose log-softmax is recomputed), reduction and ignore_index.
llvm::Error runSoftmaxCrossEntropyLossGrad(const CudaKernelCall &call) {
  auto red = readReduction(call);
  if (!red)
    return red.takeError();
  LossAttrs attrs = readLossAttrs(call);
  const DeviceTensor *dloss = call.input(0), *in = call.input(1),
                     *target = call.input(2), *weight = call.input(3),
                     *dlp = call.input(4);
  DeviceTensor *dx = call.output(0);
  const llvm::StringRef op = call.opType;
  if (!dloss || !target || !dx)
    return cudaKernelError(op + ": needs dloss, target and an output");
  if (!isFloatDType(dx->dtype) || dx->shape.size() < 2)
    return cudaKernelError(op +
                           ": output must be a float [N, C, ...], "
                           "it is " +
                           dtypeName(dx->dtype) + formatShape(dx->shape));
  if (!isIndexType(target->dtype))
    return cudaKernelError(op + ": target must be int32 or int64, not " +
                           dtypeName(target->dtype));
  if (!targetMatches(*target, dx->shape))
    return cudaKernelError(op + ": target shape " + formatShape(target->shape) +
                           " does not match input shape " +
                           formatShape(dx->shape));
  SoftmaxRows g = lossRows(dx->shape);
  int64_t positions = g.rows();
  bool none = *red == ReductionKind::None;
  if (dloss->dtype != dx->dtype ||
      dloss->numElements() != (none ? positions : 1))
    return cudaKernelError(op + ": dloss is " + dtypeName(dloss->dtype) +
                           formatShape(dloss->shape) + ", expected " +
                           llvm::Twine(none ? positions : 1) + " " +
                           dtypeName(dx->dtype) + " elements");
  if (weight && (weight->dtype != dx->dtype || weight->shape.size() != 1 ||
                 weight->shape[0] != g.d))
    return cudaKernelError(op + ": weight must be a [" + llvm::Twine(g.d) +
                           "] " + dtypeName(dx->dtype) + " tensor, it is " +
                           dtypeName(weight->dtype) +
                           formatShape(weight->shape));
  auto matchesOutput = [&](const DeviceTensor *t) {
    return t && t->dtype == dx->dtype && t->shape == dx->shape;
  };
  if (!matchesOutput(in) || (dlp && !matchesOutput(dlp)))
    return cudaKernelError(op +
                           ": log_prob (or scores) and its gradient must be " +
                           dtypeName(dx->dtype) + formatShape(dx->shape));
  bool isLogProb = call.attrs.getInt("log_prob", 0) != 0;

  return dispatchFloat(dx->dtype, op, [&](auto tag) -> llvm::Error {
    using T = decltype(tag);
    if (g.elements() == 0)
      return llvm::Error::success();
    if (!dloss->data || !in->data || !target->data || !dx->data ||
        (weight && !weight->data) || (dlp && !dlp->data))
      return nullPointer(call);
    return withTargetType(target->dtype, [&](auto tgtTag) -> llvm::Error {
      using Tgt = decltype(tgtTag);
      SceGradOp<T, Tgt> grad{
          static_cast<const T *>(in->data),
          dlp ? static_cast<const T *>(dlp->data) : nullptr,
          static_cast<const T *>(dloss->data),
          static_cast<const Tgt *>(target->data),
          weight ? static_cast<const T *>(weight->data) : nullptr,
          static_cast<T *>(dx->data),
          g.d,
          attrs,
          isLogProb,
          none,
          *red == ReductionKind::Mean};
      RowLayoutKind k = chooseRowLayout(g.d, g.inner);
      int64_t blocks = rowBlocks(k, g);
      if (grad.mean)
        blocks = meanGradBlocks(blocks, positions);
      withLayout(k, [&](auto layout) {
        sceGradKernel<decltype(layout)::value, T, Tgt>
            <<<static_cast<unsigned>(blocks), blockShape(k), 0,
               call.stream>>>(grad, g);
      });
      return checkLaunch(kernelName(call, dx->dtype));
    });
  });
}

} // namespace zinc::cuda
