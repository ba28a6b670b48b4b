//===- Training.cu - Dropout, optimizer updates and loss scaling on the GPU ===//
//
// The cuda counterparts of runtime/cpu/kernels/Dropout.cpp,
// runtime/optim/Optimizers.cpp, LossScaling.cpp and GradAccumulation.cpp,
// element for element
// (the math is TrainingMath.h's, shared with the host tests). Loss
// scaling's state (scale, growth tracker, found-inf flag, applied steps)
// lives on the device, so whatever depends on it (skipping an overflowed
// step, the optimizer's step count, the unscaling factor) is decided inside
// the kernels: nothing here copies to the host or synchronises.
//
//===----------------------------------------------------------------------===//
#include "CudaKernels.h"
#include "DeviceTypes.cuh"
#include "TrainingMath.h"
#include "zinc/runtime/cuda/CudaCheck.h"
#include "zinc/support/GradClipping.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/Twine.h"
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

using llvm::Error;
using llvm::Twine;

namespace zinc::cuda {

/// Defined in DataMovement.cu: whether the host may read `p` (pinned,
/// managed or ordinary host memory), so that a small operand is read there
/// rather than copied back with a synchronisation.
llvm::Expected<bool> isHostReadable(const void *p);

namespace {

constexpr unsigned kThreads = 256;

//===----------------------------------------------------------------------===//
// Device helpers
//===----------------------------------------------------------------------===//

/// The value 1 or 0 in a mask of element type M (bool and integers as
/// integers, the floats as floats).
template <typename M> __device__ __forceinline__ M maskValue(bool keep) {
  if constexpr (std::is_same_v<M, __half> || std::is_same_v<M, __nv_bfloat16>)
    return storeF<M>(keep ? 1.0f : 0.0f);
  else
    return static_cast<M>(keep ? 1 : 0);
}

/// Whether a mask element is non-zero (-0.0 is zero).
template <typename M> __device__ __forceinline__ bool maskKeeps(M m) {
  if constexpr (std::is_same_v<M, __half> || std::is_same_v<M, __nv_bfloat16>)
    return loadF(m) != 0.0f;
  else
    return m != M(0);
}

/// Calls fn(M{}) with M a device type whose 1 and 0 have the bits of
/// `dtype`'s: integers and bool by width (1 has the same bits signed or
/// not), the floats as themselves.
template <typename Fn> static Error visitMaskType(DType dtype, Fn &&fn) {
  switch (dtype) {
  case DType::Bool:
  case DType::U8:
  case DType::I8:
    return fn(uint8_t{});
  case DType::U16:
  case DType::I16:
    return fn(uint16_t{});
  case DType::U32:
  case DType::I32:
    return fn(uint32_t{});
  case DType::U64:
  case DType::I64:
    return fn(uint64_t{});
  case DType::F32:
    return fn(float{});
  case DType::F64:
    return fn(double{});
  case DType::F16:
    return fn(__half{});
  case DType::BF16:
    return fn(__nv_bfloat16{});
  }
  return cudaKernelError("Dropout: mask of unknown element type");
}

//===----------------------------------------------------------------------===//
// Dropout
//===----------------------------------------------------------------------===//

/// What decides a training-mode Dropout's mask (the cpu's DropoutStream).
struct DropoutStream {
  uint64_t seed = 0;
  int64_t step = 0;
  uint32_t seedId = 0;
  float ratio = 0;
  float scale = 1;
  /// The stream index of element 0.
  uint64_t offset = 0;
};

/// y = x * keep * scale and mask = keep for n elements (`y`, `mask` may be
/// null). Each thread draws one Philox block, four elements' words, so
/// every random word is computed once.
template <typename T, typename M>
__global__ void __launch_bounds__(kThreads)
    dropoutKernel(const T *x, T *y, M *mask, int64_t n, DropoutStream s) {
  uint64_t firstBlock = s.offset / 4;
  uint64_t blocks = (s.offset + n + 3) / 4 - firstBlock;
  uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t b = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
       b < blocks; b += stride) {
    uint64_t block = firstBlock + b;
    Philox4x32Counter words = dropoutBlock(s.seed, s.step, s.seedId, block);
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      uint64_t index = block * 4 + w;
      if (index < s.offset || index - s.offset >= uint64_t(n))
        continue;
      int64_t i = int64_t(index - s.offset);
      bool keep = dropoutKeeps(words.v[w], s.ratio);
      if (y)
        y[i] = storeF<T>(dropoutApply(loadF(x[i]), keep, s.scale));
      if (mask)
        mask[i] = maskValue<M>(keep);
    }
  }
}

/// dx = dy * keep * scale with keep read from the forward's mask.
template <typename T, typename M>
__global__ void __launch_bounds__(kThreads)
    dropoutMaskedKernel(const T *dy, const M *mask, T *dx, int64_t n,
                        float scale) {
  int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride)
    dx[i] = storeF<T>(dropoutApply(loadF(dy[i]), maskKeeps(mask[i]), scale));
}

/// Fills a mask with ones (inference Dropout keeps everything).
template <typename M>
__global__ void __launch_bounds__(kThreads) fillOnesKernel(M *mask, int64_t n) {
  int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride)
    mask[i] = maskValue<M>(true);
}

//===----------------------------------------------------------------------===//
// Optimizers
//===----------------------------------------------------------------------===//

/// fp16 loss scaling's device scalars, all null without loss scaling.
struct LossScaleState {
  const float *foundInf = nullptr;
  const float *scale = nullptr;
  const int64_t *applied = nullptr;
};

/// --clip-grad-norm's operands: the device sum of the gradients' squares
/// (null without clipping) and the node's max_grad_norm.
struct ClipState {
  const float *sumSquares = nullptr;
  float maxNorm = 0;
};

template <typename G, typename C> struct AdamArgs {
  float *param, *expAvg, *expAvgSq;
  const G *grad;
  /// The compute copy; C = float stands for "none".
  C *copy;
  int64_t n;
  /// The step's constants where the host knows the step (no loss scaling).
  AdamStepConstants constants;
  /// Otherwise each block derives them from the applied-step count.
  AdamHyper hyper;
  int64_t delayed;
  LossScaleState loss;
  ClipState clip;
};

template <typename G, typename C>
__global__ void __launch_bounds__(kThreads) adamKernel(AdamArgs<G, C> a) {
  // GradScaler skips the step on an overflow: every thread reads the same
  // flag, so the whole block returns (before the barrier below).
  if (a.loss.foundInf && *a.loss.foundInf != 0)
    return;
  AdamStepConstants c = a.constants;
  if (a.loss.applied) {
    __shared__ AdamStepConstants shared;
    if (threadIdx.x == 0)
      shared = adamStepConstants(
          a.hyper, optimizerStep(0, a.loss.applied, a.delayed), a.loss.scale);
    __syncthreads();
    c = shared;
  }
  if (a.clip.sumSquares) {
    c.clip = true;
    c.clipCoef = clipCoefficient(*a.clip.sumSquares, a.clip.maxNorm);
  }
  int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < a.n;
       i += stride) {
    float p = a.param[i], m = a.expAvg[i], v = a.expAvgSq[i];
    adamUpdate(c, loadF(a.grad[i]), p, m, v);
    a.expAvg[i] = m;
    a.expAvgSq[i] = v;
    a.param[i] = p;
    if constexpr (!std::is_same_v<C, float>)
      a.copy[i] = storeF<C>(p);
  }
}

template <typename G, typename C> struct SgdArgs {
  float *param;
  const G *grad;
  /// The momentum buffer, or null.
  float *buf;
  /// The compute copy; C = float stands for "none".
  C *copy;
  int64_t n;
  SgdConstants constants;
  /// The node's lr and schedule: constants.lr is this update's rate.
  double baseLr;
  LrSchedule schedule;
  int64_t runStep, delayed;
  LossScaleState loss;
  ClipState clip;
};

template <typename G, typename C>
__global__ void __launch_bounds__(kThreads) sgdKernel(SgdArgs<G, C> a) {
  if (a.loss.foundInf && *a.loss.foundInf != 0)
    return;
  SgdConstants c = a.constants;
  if (a.loss.scale) {
    c.unscale = true;
    c.invScale = invScaleOf(*a.loss.scale);
  }
  if (a.clip.sumSquares) {
    c.clip = true;
    c.clipCoef = clipCoefficient(*a.clip.sumSquares, a.clip.maxNorm);
  }
  int64_t step = optimizerStep(a.runStep, a.loss.applied, a.delayed);
  bool firstStep = step == 1;
  c.lr = sgdLr(a.baseLr, a.schedule, step);
  int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < a.n;
       i += stride) {
    float p = sgdUpdate(c, loadF(a.grad[i]), a.param[i],
                        a.buf ? a.buf + i : nullptr, firstStep);
    a.param[i] = p;
    if constexpr (!std::is_same_v<C, float>)
      a.copy[i] = storeF<C>(p);
  }
}

//===----------------------------------------------------------------------===//
// Loss scaling: one thread for the scalars, a grid for the gradients
//===----------------------------------------------------------------------===//

template <typename S>
__global__ void lossScaleKernel(float *scale, S *seed, float initScale,
                                float divisor) {
  float s = *scale;
  if (s == 0) {
    s = initScale;
    *scale = s;
  }
  float v = lossScaleSeed(s, divisor);
  if constexpr (std::is_same_v<S, double>)
    *seed = static_cast<double>(v);
  else
    *seed = storeF<S>(v);
}

/// found_inf's starting value: kept (as 1) when ORing into it (a later
/// check, or a later micro-batch of the optimizer step), else 0.
__global__ void startFoundInfKernel(float *flag, bool keep) {
  *flag = keep && *flag != 0 ? 1.0f : 0.0f;
}

/// Sets found_inf to 1 when some g[i] * inv_scale is inf or NaN; every
/// writer stores the same 1, so plain stores suffice.
template <typename G>
__global__ void __launch_bounds__(kThreads)
    checkFiniteKernel(const G *g, int64_t n, const float *scale, float *flag) {
  float inv = invScaleOf(*scale);
  bool bad = false;
  int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride)
    bad |= !isfinite(mulRn(loadF(g[i]), inv));
  if (bad)
    *flag = 1.0f;
}

/// AccumulateGrad: acc = grad in the first micro-batch, acc += grad after.
template <typename G>
__global__ void __launch_bounds__(kThreads)
    accumulateGradKernel(float *acc, const G *grad, int64_t n, bool first) {
  int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride)
    acc[i] = accumulateGradAt(acc[i], loadF(grad[i]), first);
}

/// torch._amp_update_scale_, and one more applied step unless skipped.
__global__ void updateLossScaleKernel(float *scale, int64_t *tracker,
                                      const float *foundInf, int64_t *applied,
                                      double growth, double backoff,
                                      int64_t interval) {
  if (*foundInf != 0) {
    *scale = static_cast<float>(*scale * backoff);
    *tracker = 0;
    return;
  }
  ++*applied;
  int64_t successful = *tracker + 1;
  if (successful == interval) {
    float grown = static_cast<float>(*scale * growth);
    if (isfinite(grown)) // GradScaler never grows the scale to inf.
      *scale = grown;
    *tracker = 0;
  } else {
    *tracker = successful;
  }
}

} // namespace

//===----------------------------------------------------------------------===//
// Host side: Dropout
//===----------------------------------------------------------------------===//

static Error checkSameCount(const CudaKernelCall &call, const DeviceTensor &t,
                            const DeviceTensor &data, const char *what) {
  if (t.numElements() == data.numElements())
    return Error::success();
  return cudaKernelError(call.opType + ": " + what + " shape " +
                         formatShape(t.shape) + " differs from data shape " +
                         formatShape(data.shape));
}

/// The stream of a training-mode node, checked as the cpu checks it.
static llvm::Expected<DropoutStream> streamFor(const CudaKernelCall &call,
                                               double ratio) {
  if (!(ratio >= 0 && ratio < 1))
    return cudaKernelError(call.opType + ": ratio " +
                           Twine(std::to_string(ratio)) +
                           " is outside [0, 1)");
  if (!call.attrs.has("seed_id"))
    return cudaKernelError(call.opType + ": the seed_id attribute is missing");
  int64_t id = call.attrs.getInt("seed_id", 0);
  if (id < 0 || id > UINT32_MAX)
    return cudaKernelError(call.opType + ": seed_id " + Twine(id) +
                           " is not a 32-bit unsigned integer");
  DropoutStream s;
  s.ratio = static_cast<float>(ratio);
  s.scale = 1.0f / (1.0f - s.ratio);
  s.seedId = static_cast<uint32_t>(id);
  s.seed = call.seed;
  s.step = call.sampleStep();
  // A CudaKernelCall carries no communicator: rank 0's numbering. (The cpu
  // kernel numbers rank r's elements from r times the tensor's size.)
  s.offset = 0;
  return s;
}

/// Launches the draw for `n` elements: y = x * keep * scale where x and y
/// are given, the mask where `mask` is.
template <typename T>
static Error launchDropout(const CudaKernelCall &call, const DropoutStream &s,
                           const T *x, T *y, DeviceTensor *mask, int64_t n) {
  if (n == 0)
    return Error::success();
  unsigned grid = gridFor((n + 3) / 4 + 1, kThreads);
  auto launch = [&](auto mtag) -> Error {
    using M = decltype(mtag);
    dropoutKernel<T, M><<<grid, kThreads, 0, call.stream>>>(
        x, y, mask ? static_cast<M *>(mask->data) : nullptr, n, s);
    return checkLaunch(call.opType + " (dropoutKernel)");
  };
  if (!mask)
    return launch(uint8_t{});
  return visitMaskType(mask->dtype, launch);
}

static Error dropoutForward(const CudaKernelCall &call,
                            const DropoutStream &s) {
  const DeviceTensor &x = *call.input(0);
  DeviceTensor &y = *call.output(0);
  DeviceTensor *mask = call.output(1);
  if (y.dtype != x.dtype)
    return cudaKernelError(call.opType + ": output has type " +
                           dtypeName(y.dtype) + " but data has type " +
                           dtypeName(x.dtype));
  if (Error e = checkSameCount(call, y, x, "output"))
    return e;
  if (mask)
    if (Error e = checkSameCount(call, *mask, x, "mask"))
      return e;
  return dispatchFloat(x.dtype, call.opType, [&](auto tag) -> Error {
    using T = decltype(tag);
    return launchDropout<T>(call, s, static_cast<const T *>(x.data),
                            static_cast<T *>(y.data), mask, x.numElements());
  });
}

/// Reads a scalar operand of the ONNX form (ratio, training_mode) on the
/// host: an error where it lies in device memory.
static llvm::Expected<double> readHostScalar(const CudaKernelCall &call,
                                             const DeviceTensor &t,
                                             const char *what) {
  if (t.numElements() != 1)
    return cudaKernelError(call.opType + ": " + what + " must be a scalar");
  auto readable = isHostReadable(t.data);
  if (!readable)
    return readable.takeError();
  if (!*readable)
    return cudaKernelError(
        "unsupported: " + call.opType + " with its " + what +
        " in device memory on the cuda backend (reading it would synchronise; "
        "give it as a Constant node)");
  const void *p = t.data;
  switch (t.dtype) {
  case DType::F32:
    return static_cast<double>(*static_cast<const float *>(p));
  case DType::F64:
    return *static_cast<const double *>(p);
  case DType::F16: {
    uint16_t bits = *static_cast<const uint16_t *>(p);
    __half_raw raw;
    raw.x = bits;
    return static_cast<double>(__half2float(__half(raw)));
  }
  case DType::BF16: {
    uint32_t bits = uint32_t(*static_cast<const uint16_t *>(p)) << 16;
    float f;
    static_assert(sizeof f == sizeof bits, "bf16 widens to f32");
    std::memcpy(&f, &bits, sizeof f);
    return static_cast<double>(f);
  }
  case DType::Bool:
  case DType::U8:
    return static_cast<double>(*static_cast<const uint8_t *>(p));
  case DType::I8:
    return static_cast<double>(*static_cast<const int8_t *>(p));
  case DType::I32:
    return static_cast<double>(*static_cast<const int32_t *>(p));
  case DType::I64:
    return static_cast<double>(*static_cast<const int64_t *>(p));
  default:
    return cudaKernelError(call.opType + ": " + what + " of type " +
                           dtypeName(t.dtype) + " is not supported");
  }
}

Error runDropout(const CudaKernelCall &call) {
  if (!call.input(0) || !call.output(0))
    return cudaKernelError("Dropout: data input and output are required");
  // build-training's training form: Dropout(x) {ratio, seed_id}.
  if (call.attrs.has("seed_id")) {
    if (!call.attrs.has("ratio"))
      return cudaKernelError("Dropout: the ratio attribute is missing");
    auto stream = streamFor(call, call.attrs.getFloat("ratio", 0));
    if (!stream)
      return stream.takeError();
    return dropoutForward(call, *stream);
  }
  // ONNX's form: inference unless training_mode (opset 12+) is true, which
  // the cpu refuses too (build-training makes the training form wherever
  // training_mode is a Constant node).
  const DeviceTensor &x = *call.input(0);
  DeviceTensor &y = *call.output(0);
  if (y.dtype != x.dtype)
    return cudaKernelError("Dropout: output has type " + dtypeName(y.dtype) +
                           " but data has type " + dtypeName(x.dtype));
  if (Error e = checkSameCount(call, y, x, "output"))
    return e;
  DeviceTensor *mask = call.output(1);
  if (mask)
    if (Error e = checkSameCount(call, *mask, x, "mask"))
      return e;
  if (call.opsetVersion >= 12) {
    double ratio = 0.5;
    bool training = false;
    if (const DeviceTensor *r = call.input(1)) {
      auto v = readHostScalar(call, *r, "ratio");
      if (!v)
        return v.takeError();
      ratio = *v;
    }
    if (const DeviceTensor *t = call.input(2)) {
      auto v = readHostScalar(call, *t, "training_mode");
      if (!v)
        return v.takeError();
      training = *v != 0;
    }
    if (training && ratio != 0)
      return cudaKernelError(
          "Dropout: training_mode is true but build-training made no training "
          "form (no seed_id): give training_mode and ratio as Constant nodes");
  }
  if (x.byteSize() != 0 && y.data != x.data)
    ZINC_CUDA_TRY(cudaMemcpyAsync(y.data, x.data, x.byteSize(),
                                  cudaMemcpyDeviceToDevice, call.stream));
  if (!mask || mask->numElements() == 0)
    return Error::success();
  return visitMaskType(mask->dtype, [&](auto mtag) -> Error {
    using M = decltype(mtag);
    int64_t n = mask->numElements();
    fillOnesKernel<M><<<gridFor(n, kThreads), kThreads, 0, call.stream>>>(
        static_cast<M *>(mask->data), n);
    return checkLaunch("Dropout (fillOnesKernel)");
  });
}

Error runDropoutGrad(const CudaKernelCall &call) {
  const DeviceTensor *dy = call.input(0);
  DeviceTensor *dx = call.output(0);
  if (!dy || !dx)
    return cudaKernelError("DropoutGrad: input 0 and output 0 are required");
  if (dx->dtype != dy->dtype)
    return cudaKernelError("DropoutGrad: dx has type " + dtypeName(dx->dtype) +
                           " but dy has type " + dtypeName(dy->dtype));
  if (Error e = checkSameCount(call, *dx, *dy, "dx"))
    return e;
  if (!call.attrs.has("ratio"))
    return cudaKernelError("DropoutGrad: the ratio attribute is missing");
  auto stream = streamFor(call, call.attrs.getFloat("ratio", 0));
  if (!stream)
    return stream.takeError();
  const DeviceTensor *mask = call.input(1);
  if (mask)
    if (Error e = checkSameCount(call, *mask, *dy, "mask"))
      return e;
  return dispatchFloat(dy->dtype, call.opType, [&](auto tag) -> Error {
    using T = decltype(tag);
    const T *src = static_cast<const T *>(dy->data);
    T *dst = static_cast<T *>(dx->data);
    int64_t n = dy->numElements();
    // Without the mask, regenerate it from the forward's stream.
    if (!mask)
      return launchDropout<T>(call, *stream, src, dst, nullptr, n);
    if (n == 0)
      return Error::success();
    return visitMaskType(mask->dtype, [&](auto mtag) -> Error {
      using M = decltype(mtag);
      dropoutMaskedKernel<T, M>
          <<<gridFor(n, kThreads), kThreads, 0, call.stream>>>(
              src, static_cast<const M *>(mask->data), dst, n, stream->scale);
      return checkLaunch("DropoutGrad (dropoutMaskedKernel)");
    });
  });
}

//===----------------------------------------------------------------------===//
// Gradient clipping: the sum of squares, in a fixed order
//===----------------------------------------------------------------------===//

/// Blocks of the first pass: fixed, so each block's share of the elements,
/// and with it the sum's rounding, is the same on every device and run.
constexpr unsigned kSquaresBlocks = 256;

/// Block b's sum of (g[i] * inv_scale)^2 (in double) into partial[b];
/// `scale` is loss scaling's, or null.
template <typename G>
__global__ void __launch_bounds__(kThreads)
    sumSquaresKernel(const G *g, int64_t n, const float *scale, double *partial) {
  __shared__ double sums[kThreads];
  const float inv = scale ? invScaleOf(*scale) : 1.0f;
  double s = 0;
  int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    double v = scale ? mulRn(loadF(g[i]), inv) : loadF(g[i]);
    s = __fma_rn(v, v, s);
  }
  sums[threadIdx.x] = s;
  __syncthreads();
  for (unsigned half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half)
      sums[threadIdx.x] += sums[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0)
    partial[blockIdx.x] = sums[0];
}

/// sum = (accumulate ? sum : 0) + the partial sums of every gradient, in
/// order, rounded to float once.
__global__ void finishSumSquaresKernel(float *sum, const double *partial,
                                       int64_t count, bool accumulate) {
  double total = accumulate ? static_cast<double>(*sum) : 0.0;
  for (int64_t i = 0; i < count; ++i)
    total += partial[i];
  *sum = static_cast<float>(total);
}

//===----------------------------------------------------------------------===//
// Host side: optimizers
//===----------------------------------------------------------------------===//

namespace {
/// The operands an update reads besides (param, grad, states), checked as
/// the cpu's checkOperands does.
struct Extras {
  DeviceTensor *copy = nullptr;
  LossScaleState loss;
  ClipState clip;
  int64_t delayed = 0;
  LrSchedule schedule;
};
} // namespace

static bool isScalar(const DeviceTensor *t, DType dtype) {
  return t && t->dtype == dtype && t->numElements() == 1;
}

static llvm::Expected<Extras> checkOperands(const CudaKernelCall &call,
                                            size_t states) {
  size_t first = 2 + states;
  if (call.inputs.size() < first || call.inputs.size() > first + 5)
    return cudaKernelError(call.opType + " expects " + Twine(first) + " to " +
                           Twine(first + 5) + " operands");
  const DeviceTensor *param = call.inputs[0], *grad = call.inputs[1];
  int64_t n = param ? param->numElements() : 0;
  bool ok = param && param->dtype == DType::F32 && grad &&
            grad->numElements() == n &&
            (grad->dtype == DType::F32 || grad->dtype == DType::F16 ||
             grad->dtype == DType::BF16);
  for (size_t i = 2; i < first; ++i)
    ok &= !call.inputs[i] || (call.inputs[i]->dtype == DType::F32 &&
                              call.inputs[i]->numElements() == n);
  if (!ok)
    return cudaKernelError(
        "unsupported: " + call.opType +
        " on a parameter and states that are not all f32 of one size, "
        "or a gradient that is not f32, f16 or bf16 of that size");
  Extras e;
  e.delayed = call.attrs.getInt("delayed_steps", 0);
  if (e.delayed < 0)
    return cudaKernelError(call.opType +
                           ": delayed_steps must not be negative");
  auto schedule = lrScheduleFromAttrs(call.attrs);
  if (!schedule)
    return cudaKernelError(call.opType + ": " +
                           llvm::toString(schedule.takeError()));
  e.schedule = *schedule;
  if (const DeviceTensor *copy = call.input(first)) {
    if ((copy->dtype != DType::F16 && copy->dtype != DType::BF16) ||
        copy->numElements() != n)
      return cudaKernelError(
          call.opType + ": operand " + Twine(first) +
          " (the compute copy) must be f16 or bf16 of the parameter's size");
    e.copy = call.updated(first);
    if (!e.copy)
      return cudaKernelError(
          call.opType + ": operand " + Twine(first) +
          " (the compute copy) is not declared written (Ops.def)");
  }
  const DeviceTensor *foundInf = call.input(first + 1),
                     *scale = call.input(first + 2),
                     *applied = call.input(first + 3);
  if (foundInf || scale || applied) {
    if (!isScalar(foundInf, DType::F32) || !isScalar(scale, DType::F32) ||
        !isScalar(applied, DType::I64))
      return cudaKernelError(
          call.opType + ": loss scaling operands must be found_inf f32[], "
                        "scale f32[] and the applied-step count i64[]");
    e.loss.foundInf = static_cast<const float *>(foundInf->data);
    e.loss.scale = static_cast<const float *>(scale->data);
    e.loss.applied = static_cast<const int64_t *>(applied->data);
  }
  if (const DeviceTensor *sum = call.input(first + 4)) {
    e.clip.maxNorm = static_cast<float>(call.attrs.getFloat("max_grad_norm", 0));
    if (!isScalar(sum, DType::F32) || !(e.clip.maxNorm > 0))
      return cudaKernelError(call.opType +
                             ": gradient clipping needs the sum of squares "
                             "f32[] and a max_grad_norm > 0");
    e.clip.sumSquares = static_cast<const float *>(sum->data);
  }
  return e;
}

/// Calls fn(G{}, C{}) with the device types of the gradient and of the
/// compute copy (float for none).
template <typename Fn>
static Error visitGradAndCopy(const DeviceTensor &grad, const DeviceTensor *copy,
                              llvm::StringRef op, Fn &&fn) {
  return dispatchFloat(grad.dtype, op, [&](auto g) -> Error {
    if (!copy)
      return fn(g, float{});
    return dispatchFloat(copy->dtype, op, [&](auto c) { return fn(g, c); });
  });
}

static Error adam(const CudaKernelCall &call, bool decoupled) {
  auto extras = checkOperands(call, 2);
  if (!extras)
    return extras.takeError();
  DeviceTensor *param = call.updated(0), *expAvg = call.updated(2),
               *expAvgSq = call.updated(3);
  if (!param || !expAvg || !expAvgSq)
    return cudaKernelError(call.opType +
                           ": the parameter and moments are not declared "
                           "written (Ops.def)");
  // A delayed update has nothing to apply before its first gradient; an
  // overflowed step is skipped on the device.
  if (call.step <= extras->delayed)
    return Error::success();
  AdamHyper h;
  h.decoupled = decoupled;
  h.lr = call.attrs.getFloat("lr", 1e-3);
  h.schedule = extras->schedule;
  h.beta1 = call.attrs.getFloat("beta1", 0.9);
  h.beta2 = call.attrs.getFloat("beta2", 0.999);
  h.eps = call.attrs.getFloat("eps", 1e-8);
  h.weightDecay = call.attrs.getFloat("weight_decay", decoupled ? 1e-2 : 0.0);
  int64_t n = param->numElements();
  if (n == 0)
    return Error::success();
  return visitGradAndCopy(
      *call.inputs[1], extras->copy, call.opType, [&](auto g, auto c) {
        using G = decltype(g);
        using C = decltype(c);
        AdamArgs<G, C> a;
        a.param = static_cast<float *>(param->data);
        a.expAvg = static_cast<float *>(expAvg->data);
        a.expAvgSq = static_cast<float *>(expAvgSq->data);
        a.grad = static_cast<const G *>(call.inputs[1]->data);
        a.copy = extras->copy ? static_cast<C *>(extras->copy->data) : nullptr;
        a.n = n;
        a.hyper = h;
        a.delayed = extras->delayed;
        a.loss = extras->loss;
        a.clip = extras->clip;
        // Without loss scaling the step is the run's: the host computes
        // the constants once.
        if (!a.loss.applied)
          a.constants = adamStepConstants(
              h, optimizerStep(call.step, nullptr, extras->delayed), nullptr);
        adamKernel<G, C><<<gridFor(n, kThreads), kThreads, 0, call.stream>>>(a);
        return checkLaunch(call.opType + " (adamKernel)");
      });
}

Error runAdamW(const CudaKernelCall &call) { return adam(call, true); }
Error runAdam(const CudaKernelCall &call) { return adam(call, false); }

Error runSGD(const CudaKernelCall &call) {
  // (param, grad) or (param, grad, momentum_buffer | none, extras...).
  auto extras = checkOperands(call, call.inputs.size() > 2 ? 1 : 0);
  if (!extras)
    return extras.takeError();
  DeviceTensor *param = call.updated(0);
  if (!param)
    return cudaKernelError(call.opType +
                           ": the parameter is not declared written "
                           "(Ops.def)");
  DeviceTensor *buf = call.input(2) ? call.updated(2) : nullptr;
  if (call.input(2) && !buf)
    return cudaKernelError(call.opType +
                           ": the momentum buffer is not declared written "
                           "(Ops.def)");
  if (call.step <= extras->delayed)
    return Error::success();
  SgdConstants k;
  k.lr = static_cast<float>(call.attrs.getFloat("lr", 1e-3));
  k.weightDecay = static_cast<float>(call.attrs.getFloat("weight_decay", 0));
  k.momentum = static_cast<float>(call.attrs.getFloat("momentum", 0));
  k.dampening = static_cast<float>(call.attrs.getFloat("dampening", 0));
  k.nesterov = call.attrs.getInt("nesterov", 0) != 0;
  int64_t n = param->numElements();
  if (n == 0)
    return Error::success();
  return visitGradAndCopy(
      *call.inputs[1], extras->copy, call.opType, [&](auto g, auto c) {
        using G = decltype(g);
        using C = decltype(c);
        SgdArgs<G, C> a;
        a.param = static_cast<float *>(param->data);
        a.grad = static_cast<const G *>(call.inputs[1]->data);
        a.buf = buf ? static_cast<float *>(buf->data) : nullptr;
        a.copy = extras->copy ? static_cast<C *>(extras->copy->data) : nullptr;
        a.n = n;
        a.constants = k;
        a.baseLr = call.attrs.getFloat("lr", 1e-3);
        a.schedule = extras->schedule;
        a.runStep = call.step;
        a.delayed = extras->delayed;
        a.loss = extras->loss;
        a.clip = extras->clip;
        sgdKernel<G, C><<<gridFor(n, kThreads), kThreads, 0, call.stream>>>(a);
        return checkLaunch(call.opType + " (sgdKernel)");
      });
}

//===----------------------------------------------------------------------===//
// Host side: loss scaling
//===----------------------------------------------------------------------===//

Error runLossScale(const CudaKernelCall &call) {
  DeviceTensor *scale = call.updated(0);
  DeviceTensor *seed = call.output(0);
  if (!isScalar(scale, DType::F32) || !seed || seed->numElements() != 1)
    return cudaKernelError("LossScale expects the scale f32[] (declared "
                           "written) and one output element");
  float init = static_cast<float>(call.attrs.getFloat("init_scale", 65536.0));
  float divisor = static_cast<float>(call.attrs.getFloat("divisor", 1.0));
  if (!(divisor > 0))
    return cudaKernelError("LossScale: divisor " +
                           Twine(std::to_string(divisor)) + " is not positive");
  float *s = static_cast<float *>(scale->data);
  auto launch = [&](auto tag) -> Error {
    using S = decltype(tag);
    lossScaleKernel<S><<<1, 1, 0, call.stream>>>(
        s, static_cast<S *>(seed->data), init, divisor);
    return checkLaunch("LossScale (lossScaleKernel)");
  };
  switch (seed->dtype) {
  case DType::F32:
    return launch(float{});
  case DType::F64:
    return launch(double{});
  case DType::F16:
    return launch(__half{});
  case DType::BF16:
    return launch(__nv_bfloat16{});
  default:
    return cudaKernelError("LossScale: the seed must be a float");
  }
}

Error runCheckFiniteGrads(const CudaKernelCall &call) {
  if (call.inputs.size() < 2 || !isScalar(call.inputs[0], DType::F32) ||
      !isScalar(call.inputs[1], DType::F32))
    return cudaKernelError(
        "CheckFiniteGrads expects found_inf f32[], scale f32[], grads...");
  for (size_t k = 2; k < call.inputs.size(); ++k) {
    DType t = call.inputs[k] ? call.inputs[k]->dtype : DType::F32;
    if (t != DType::F32 && t != DType::F16 && t != DType::BF16)
      return cudaKernelError("CheckFiniteGrads: gradient " + Twine(k - 2) +
                             " is not f32, f16 or bf16");
  }
  DeviceTensor *flagRef = call.updated(0);
  if (!flagRef)
    return cudaKernelError(
        "CheckFiniteGrads: found_inf is not declared written (Ops.def)");
  float *flag = static_cast<float *>(flagRef->data);
  const float *scale = static_cast<const float *>(call.inputs[1]->data);
  // Only an optimizer step's first micro-batch starts the flag afresh: an
  // overflow in any micro-batch skips the step.
  startFoundInfKernel<<<1, 1, 0, call.stream>>>(
      flag, call.attrs.getInt("accumulate", 0) != 0 || call.microBatch > 0);
  if (Error e = checkLaunch("CheckFiniteGrads (startFoundInfKernel)"))
    return e;
  for (size_t k = 2; k < call.inputs.size(); ++k) {
    const DeviceTensor *g = call.inputs[k];
    if (!g || g->numElements() == 0)
      continue;
    int64_t n = g->numElements();
    Error e = dispatchFloat(g->dtype, call.opType, [&](auto tag) -> Error {
      using G = decltype(tag);
      checkFiniteKernel<G><<<gridFor(n, kThreads), kThreads, 0, call.stream>>>(
          static_cast<const G *>(g->data), n, scale, flag);
      return checkLaunch("CheckFiniteGrads (checkFiniteKernel, gradient " +
                         Twine(k - 2) + ")");
    });
    if (e)
      return e;
  }
  return Error::success();
}

//===----------------------------------------------------------------------===//
// Host side: gradient accumulation
//===----------------------------------------------------------------------===//

Error runAccumulateGrad(const CudaKernelCall &call) {
  const DeviceTensor *grad = call.input(1);
  DeviceTensor *acc = call.updated(0);
  if (!acc || !grad || acc->dtype != DType::F32 ||
      grad->numElements() != acc->numElements())
    return cudaKernelError(
        "AccumulateGrad expects an f32 accumulator (declared "
        "written) and a gradient of its element count");
  if (grad->dtype != DType::F32 && grad->dtype != DType::F16 &&
      grad->dtype != DType::BF16)
    return cudaKernelError("AccumulateGrad: the gradient is " +
                           dtypeName(grad->dtype) + ", not f32, f16 or bf16");
  int64_t n = acc->numElements();
  if (n == 0)
    return Error::success();
  bool first = call.microBatch == 0;
  return dispatchFloat(grad->dtype, call.opType, [&](auto tag) -> Error {
    using G = decltype(tag);
    accumulateGradKernel<G><<<gridFor(n, kThreads), kThreads, 0, call.stream>>>(
        static_cast<float *>(acc->data), static_cast<const G *>(grad->data), n,
        first);
    return checkLaunch("AccumulateGrad (accumulateGradKernel)");
  });
}

//===----------------------------------------------------------------------===//
// Host side: gradient clipping
//===----------------------------------------------------------------------===//

Error runSumGradSquares(const CudaKernelCall &call) {
  if (call.inputs.size() < 3 || !isScalar(call.inputs[0], DType::F32) ||
      (call.inputs[1] && !isScalar(call.inputs[1], DType::F32)))
    return cudaKernelError("SumGradSquares expects the sum f32[], the loss "
                           "scale f32[] or none, and gradients");
  const float *scale =
      call.inputs[1] ? static_cast<const float *>(call.inputs[1]->data) : nullptr;
  DeviceTensor *sumRef = call.updated(0);
  if (!sumRef)
    return cudaKernelError(
        "SumGradSquares: the sum is not declared written (Ops.def)");
  size_t grads = 0;
  for (size_t k = 2; k < call.inputs.size(); ++k) {
    const DeviceTensor *g = call.inputs[k];
    if (g && g->dtype != DType::F32 && g->dtype != DType::F16 &&
        g->dtype != DType::BF16)
      return cudaKernelError("SumGradSquares: gradient " + Twine(k - 2) +
                             " is not f32, f16 or bf16");
    grads += g && g->numElements() > 0;
  }
  auto partial = call.scratch<double>(uint64_t(kSquaresBlocks) * (grads ? grads : 1));
  if (!partial)
    return partial.takeError();
  int64_t filled = 0;
  for (size_t k = 2; k < call.inputs.size(); ++k) {
    const DeviceTensor *g = call.inputs[k];
    if (!g || g->numElements() == 0)
      continue;
    int64_t n = g->numElements();
    Error e = dispatchFloat(g->dtype, call.opType, [&](auto tag) -> Error {
      using G = decltype(tag);
      sumSquaresKernel<G><<<kSquaresBlocks, kThreads, 0, call.stream>>>(
          static_cast<const G *>(g->data), n, scale, *partial + filled);
      return checkLaunch("SumGradSquares (sumSquaresKernel, gradient " +
                         Twine(k - 2) + ")");
    });
    if (e)
      return e;
    filled += kSquaresBlocks;
  }
  finishSumSquaresKernel<<<1, 1, 0, call.stream>>>(
      static_cast<float *>(sumRef->data), *partial, filled,
      call.attrs.getInt("accumulate", 0) != 0);
  return checkLaunch("SumGradSquares (finishSumSquaresKernel)");
}

Error runUpdateLossScale(const CudaKernelCall &call) {
  if (call.inputs.size() != 4 || !isScalar(call.inputs[0], DType::F32) ||
      !isScalar(call.inputs[1], DType::I64) ||
      !isScalar(call.inputs[2], DType::F32) ||
      !isScalar(call.inputs[3], DType::I64))
    return cudaKernelError(
        "UpdateLossScale expects scale f32[], growth_tracker i64[], "
        "found_inf f32[], applied steps i64[]");
  DeviceTensor *scale = call.updated(0), *tracker = call.updated(1),
               *applied = call.updated(3);
  if (!scale || !tracker || !applied)
    return cudaKernelError("UpdateLossScale: scale, growth tracker and "
                           "applied steps are not declared written "
                           "(Ops.def)");
  updateLossScaleKernel<<<1, 1, 0, call.stream>>>(
      static_cast<float *>(scale->data), static_cast<int64_t *>(tracker->data),
      static_cast<const float *>(call.inputs[2]->data),
      static_cast<int64_t *>(applied->data),
      call.attrs.getFloat("growth_factor", 2.0),
      call.attrs.getFloat("backoff_factor", 0.5),
      call.attrs.getInt("growth_interval", 2000));
  return checkLaunch("UpdateLossScale (updateLossScaleKernel)");
}

} // namespace zinc::cuda
