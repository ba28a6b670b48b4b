//===- Losses.cu - NegativeLogLikelihoodLoss and its gradient -------------===//
//
// The NLL loss of an [N, C, d1..dk] input of log-probabilities is
// -w[t] * input[n, t, d] at every position (n, d); its gradient puts
// a = -dloss * w[t] / den at the target class and 0 elsewhere. The
// per-position math is SoftmaxCrossEntropyLoss's (SoftmaxMath.h), with the
// log-sum-exp 0, since the input already is log_prob.
//
// Reductions are deterministic without atomics: a grid whose size depends
// only on the shape sums, per block and in double, the losses and weights of
// its threads' positions (each thread's in order, the block's threads in a
// tree of fixed shape); one block then adds the blocks' sums in block
// order, through the call's scratch. Mean divides by the total weight of
// the non-ignored positions, as the cpu kernels and PyTorch do.
//
// The cpu refuses a target out of range after reading the targets; the GPU
// cannot without waiting for the device, so such a position's loss and
// gradient are NaN (and so is a mean over it), as SoftmaxCrossEntropyLoss
// does.
//
//===----------------------------------------------------------------------===//
#include "BlockReduce.cuh"
#include "CudaKernels.h"
#include "DeviceTypes.cuh"
#include "MiscMath.h"
#include "SoftmaxMath.h"
#include "zinc/runtime/cuda/CudaCheck.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/Twine.h"
#include <algorithm>
#include <cstdint>

namespace zinc::cuda {
namespace {

using llvm::Error;
using llvm::Twine;

constexpr unsigned kThreads = 256;
/// At most this many blocks sum positions (a fixed number for a shape,
/// so the sums' order never changes).
constexpr int64_t kMaxSumBlocks = 1024;

enum class ReductionKind { None, Sum, Mean };

/// What both kernels read from the attributes and operands.
template <typename T, typename Tgt> struct NllArgs {
  const Tgt *target;
  const T *weight; // null: every class weighs 1
  int64_t positions, classes, inner;
  bool hasIgnoreIndex;
  int64_t ignoreIndex;

  __device__ TargetKind classify(int64_t t) const {
    return classifyTarget(t, classes, hasIgnoreIndex, ignoreIndex);
  }
  __device__ float weightOf(int64_t t) const {
    return weight ? loadF(weight[t]) : 1.0f;
  }
};

//===----------------------------------------------------------------------===//
// Device helpers
//===----------------------------------------------------------------------===//

/// Where a reduction's result goes: the loss itself (forward) or, for the
/// gradient, the mean's denominator in scratch.
template <typename T> struct SumResult {
  T *loss = nullptr;
  double *den = nullptr;
  bool mean = false;

  __device__ void write(double lossSum, double weightSum) const {
    if (loss)
      loss[0] =
          storeF<T>(static_cast<float>(mean ? lossSum / weightSum : lossSum));
    if (den)
      *den = weightSum;
  }
};

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

/// Per position: the loss (into `perPosition` when the reduction is none)
/// and, when `partials` or one block, the block's sums of loss and weight.
/// Without `x` only the weights are summed (the gradient's denominator).
template <typename T, typename Tgt>
__global__ void __launch_bounds__(kThreads)
    nllSumsKernel(NllArgs<T, Tgt> a, const T *x, T *perPosition, bool reduce,
                  double *partials, SumResult<T> result) {
  __shared__ double shared[32];
  double l = 0, w = 0;
  int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
       p < a.positions; p += step) {
    int64_t t = static_cast<int64_t>(a.target[p]);
    float lp = 0, wp = 0;
    switch (a.classify(t)) {
    case TargetKind::Ignored:
      break;
    case TargetKind::OutOfRange:
      lp = wp = NAN;
      break;
    case TargetKind::Class:
      wp = a.weightOf(t);
      if (x)
        lp = sceLoss(loadF(x[misc::nllInputOffset(p, t, a.classes, a.inner)]),
                     0.0f, wp);
      break;
    }
    if (perPosition)
      perPosition[p] = storeF<T>(lp);
    l += lp;
    w += wp;
  }
  if (!reduce)
    return;
  l = blockSumToThread0(l, shared);
  w = blockSumToThread0(w, shared);
  if (threadIdx.x != 0)
    return;
  if (gridDim.x == 1) {
    result.write(l, w);
    return;
  }
  partials[2 * blockIdx.x] = l;
  partials[2 * blockIdx.x + 1] = w;
}

/// Adds the blocks' partial sums in a fixed order.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    nllFinishKernel(const double *partials, int64_t blocks,
                    SumResult<T> result) {
  __shared__ double shared[32];
  double l = 0, w = 0;
  for (int64_t b = threadIdx.x; b < blocks; b += blockDim.x) {
    l += partials[2 * b];
    w += partials[2 * b + 1];
  }
  l = blockSumToThread0(l, shared);
  w = blockSumToThread0(w, shared);
  if (threadIdx.x == 0)
    result.write(l, w);
}

/// dx[n, c, d] = a at c == target[n, d] (NaN across an out-of-range
/// target's position), 0 elsewhere; `den` null unless the mean's.
template <typename T, typename Tgt>
__global__ void __launch_bounds__(kThreads)
    nllGradKernel(NllArgs<T, Tgt> a, const T *dloss, bool reduceNone,
                  const double *den, T *dx, int64_t total) {
  double d = den ? *den : 1.0;
  int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += step) {
    int64_t p, c;
    misc::nllElement(e, a.classes, a.inner, p, c);
    int64_t t = static_cast<int64_t>(a.target[p]);
    double v = 0;
    switch (a.classify(t)) {
    case TargetKind::Ignored:
      break;
    case TargetKind::OutOfRange:
      v = NAN;
      break;
    case TargetKind::Class:
      if (c == t)
        v = sceCoefficient(loadF(dloss[reduceNone ? p : 0]), a.weightOf(t), d);
      break;
    }
    dx[e] = storeF<T>(static_cast<float>(v));
  }
}

//===----------------------------------------------------------------------===//
// Host helpers
//===----------------------------------------------------------------------===//

llvm::Expected<ReductionKind> readReduction(const CudaKernelCall &call) {
  llvm::StringRef red = call.attrs.getString("reduction", "mean");
  if (red == "none")
    return ReductionKind::None;
  if (red == "sum")
    return ReductionKind::Sum;
  if (red == "mean")
    return ReductionKind::Mean;
  return cudaKernelError(call.opType + ": unknown reduction '" + red + "'");
}

/// The target's shape is the input's without the class dimension.
bool targetMatches(const DeviceTensor &target, llvm::ArrayRef<int64_t> input) {
  llvm::SmallVector<int64_t, 6> tshape(input.begin(), input.end());
  tshape.erase(tshape.begin() + 1);
  return llvm::ArrayRef<int64_t>(target.shape) ==
         llvm::ArrayRef<int64_t>(tshape);
}

bool isIndexType(DType t) { return t == DType::I32 || t == DType::I64; }

/// Calls fn(Tgt{}) for an int32 or int64 target.
template <typename Fn> Error withTargetType(DType t, Fn &&fn) {
  if (t == DType::I64)
    return fn(int64_t{});
  return fn(int32_t{});
}

/// Blocks of the summing kernel for `positions`: fixed by the shape.
unsigned sumBlocks(int64_t positions) {
  return static_cast<unsigned>(std::clamp<int64_t>(
      (positions + kThreads - 1) / kThreads, 1, kMaxSumBlocks));
}

/// Queues the sums of loss (when `x`) and weight over every position into
/// `result`, through scratch when more than one block sums. Without
/// scratch laid out for the call, one block does it all.
template <typename T, typename Tgt>
Error launchSums(const CudaKernelCall &call, const NllArgs<T, Tgt> &a,
                 const T *x, T *perPosition, bool reduce,
                 const SumResult<T> &result) {
  unsigned blocks = sumBlocks(a.positions);
  if (reduce && blocks > 1 && call.workspaceBytes == 0)
    blocks = 1;
  double *partials = nullptr;
  if (reduce && blocks > 1) {
    auto s = call.scratch<double>(2 * uint64_t(blocks));
    if (!s)
      return s.takeError();
    partials = *s;
  }
  nllSumsKernel<T, Tgt><<<blocks, kThreads, 0, call.stream>>>(
      a, x, perPosition, reduce, partials, result);
  if (Error e = checkLaunch(call.opType + " kernel"))
    return e;
  if (!partials)
    return Error::success();
  nllFinishKernel<T><<<1, kThreads, 0, call.stream>>>(partials, blocks, result);
  return checkLaunch(call.opType + " reduction kernel");
}

Error nullPointer(const CudaKernelCall &call) {
  return cudaKernelError(call.opType + ": null device pointer");
}

} // namespace

//===----------------------------------------------------------------------===//
// NegativeLogLikelihoodLoss
//===----------------------------------------------------------------------===//

/// Inputs (log_prob [N, C, d1..dk], target, [weight]); output loss;
/// attributes reduction and ignore_index.
Error runNegativeLogLikelihoodLoss(const CudaKernelCall &call) {
  auto red = readReduction(call);
  if (!red)
    return red.takeError();
  const DeviceTensor *in = call.input(0), *target = call.input(1),
                     *weight = call.input(2);
  DeviceTensor *loss = call.output(0);
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
  int64_t classes = in->shape[1];
  if (weight && (weight->dtype != in->dtype || weight->shape.size() != 1 ||
                 weight->shape[0] != classes))
    return cudaKernelError(op + ": weight must be a [" + Twine(classes) + "] " +
                           dtypeName(in->dtype) + " tensor, it is " +
                           dtypeName(weight->dtype) +
                           formatShape(weight->shape));
  int64_t positions = target->numElements();
  int64_t lossCount = *red == ReductionKind::None ? positions : 1;
  if (loss->dtype != in->dtype || loss->numElements() != lossCount)
    return cudaKernelError(op + ": loss output must hold " + Twine(lossCount) +
                           " " + dtypeName(in->dtype) + " elements, it is " +
                           dtypeName(loss->dtype) + formatShape(loss->shape));

  return dispatchFloat(in->dtype, op, [&](auto tag) -> Error {
    using T = decltype(tag);
    bool reduce = *red != ReductionKind::None;
    // No positions: nothing to write unless a reduced loss (0, or 0/0).
    if (positions == 0 && !reduce)
      return Error::success();
    if (!loss->data || (positions > 0 && (!in->data || !target->data)) ||
        (weight && classes > 0 && !weight->data))
      return nullPointer(call);
    return withTargetType(target->dtype, [&](auto tgtTag) -> Error {
      using Tgt = decltype(tgtTag);
      NllArgs<T, Tgt> a{static_cast<const Tgt *>(target->data),
                        weight ? static_cast<const T *>(weight->data) : nullptr,
                        positions,
                        classes,
                        positions ? positions / in->shape[0] : 1,
                        call.attrs.has("ignore_index"),
                        call.attrs.getInt("ignore_index", 0)};
      SumResult<T> result;
      result.loss = static_cast<T *>(loss->data);
      result.mean = *red == ReductionKind::Mean;
      return launchSums(call, a, static_cast<const T *>(in->data),
                        reduce ? nullptr : static_cast<T *>(loss->data), reduce,
                        result);
    });
  });
}

//===----------------------------------------------------------------------===//
// NegativeLogLikelihoodLossGrad
//===----------------------------------------------------------------------===//

/// Inputs (dloss, target, [weight]), output dinput [N, C, d1..dk];
/// attributes reduction and ignore_index as on the forward node.
Error runNegativeLogLikelihoodLossGrad(const CudaKernelCall &call) {
  auto red = readReduction(call);
  if (!red)
    return red.takeError();
  const DeviceTensor *dloss = call.input(0), *target = call.input(1),
                     *weight = call.input(2);
  DeviceTensor *dx = call.output(0);
  const llvm::StringRef op = call.opType;
  if (!dloss || !target || !dx)
    return cudaKernelError(op + ": needs dloss, target and an output");
  if (!isFloatDType(dx->dtype) || dx->shape.size() < 2)
    return cudaKernelError(op + ": output must be a float [N, C, ...], it is " +
                           dtypeName(dx->dtype) + formatShape(dx->shape));
  if (!isIndexType(target->dtype))
    return cudaKernelError(op + ": target must be int32 or int64, not " +
                           dtypeName(target->dtype));
  if (!targetMatches(*target, dx->shape))
    return cudaKernelError(op + ": target shape " + formatShape(target->shape) +
                           " does not match input shape " +
                           formatShape(dx->shape));
  int64_t classes = dx->shape[1];
  int64_t positions = target->numElements();
  bool none = *red == ReductionKind::None;
  if (dloss->dtype != dx->dtype ||
      dloss->numElements() != (none ? positions : 1))
    return cudaKernelError(op + ": dloss is " + dtypeName(dloss->dtype) +
                           formatShape(dloss->shape) + ", expected " +
                           Twine(none ? positions : 1) + " " +
                           dtypeName(dx->dtype) + " elements");
  if (weight && (weight->dtype != dx->dtype || weight->shape.size() != 1 ||
                 weight->shape[0] != classes))
    return cudaKernelError(op + ": weight must be a [" + Twine(classes) + "] " +
                           dtypeName(dx->dtype) + " tensor, it is " +
                           dtypeName(weight->dtype) +
                           formatShape(weight->shape));

  return dispatchFloat(dx->dtype, op, [&](auto tag) -> Error {
    using T = decltype(tag);
    int64_t total = dx->numElements();
    if (total == 0)
      return Error::success();
    if (!dloss->data || !target->data || !dx->data || (weight && !weight->data))
      return nullPointer(call);
    return withTargetType(target->dtype, [&](auto tgtTag) -> Error {
      using Tgt = decltype(tgtTag);
      NllArgs<T, Tgt> a{static_cast<const Tgt *>(target->data),
                        weight ? static_cast<const T *>(weight->data) : nullptr,
                        positions,
                        classes,
                        positions / dx->shape[0],
                        call.attrs.has("ignore_index"),
                        call.attrs.getInt("ignore_index", 0)};
      double *den = nullptr;
      if (*red == ReductionKind::Mean) {
        // The denominator goes through scratch: every element needs it.
        auto s = call.scratch<double>(1);
        if (!s)
          return s.takeError();
        den = *s;
        SumResult<T> result;
        result.den = den;
        if (Error e = launchSums<T, Tgt>(call, a, nullptr, nullptr,
                                         /*reduce=*/true, result))
          return e;
      }
      nllGradKernel<T, Tgt>
          <<<gridFor(total, kThreads), kThreads, 0, call.stream>>>(
              a, static_cast<const T *>(dloss->data), none, den,
              static_cast<T *>(dx->data), total);
      return checkLaunch(call.opType + " kernel (" + dtypeName(dx->dtype) +
                         ")");
    });
  });
}

} // namespace zinc::cuda
