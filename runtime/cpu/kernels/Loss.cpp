//===- Loss.cpp - cpu kernels for SoftmaxCrossEntropyLoss and NLL loss ----===//
//
// Both losses pick, at every position (n, d1..dk), the log-probability of the
// target class from a [N, C, d1..dk] tensor; SoftmaxCrossEntropyLoss first
// turns scores into log-probabilities with a log-softmax over C. They share
// one implementation that differs only in that first step.
//
// Sums are accumulated per sample n in double and then added in order of n,
// so the loss does not depend on the number of threads. The per-position
// log-sum-exp (and maximum) and the per-sample sums live in the call's
// workspace, indexed by position, so threads need no scratch of their own.
//
//===----------------------------------------------------------------------===//
#include "KernelUtil.h"
#include "Kernels.h"
#include "zinc/runtime/cpu/RowMath.h"
#include "llvm/ADT/Twine.h"
#include <cmath>
#include <limits>

using llvm::Error;
using llvm::Twine;

namespace zinc::cpu {

namespace {
enum class ReductionKind { None, Sum, Mean };

/// What a loss node computes, read from its attributes and operands.
struct LossProblem {
  ReductionKind reduction;
  bool hasIgnoreIndex;
  int64_t ignoreIndex;
  /// [N, C, D] with D the product of d1..dk (1 without them).
  int64_t n, c, d;
  const TensorRef *input, *target, *weight;
  TensorRef *loss, *logProb;
};
} // namespace

static llvm::Expected<LossProblem> readProblem(const KernelCall &call,
                                               bool withLogProb) {
  LossProblem p;
  llvm::StringRef red = call.attrs.getString("reduction", "mean");
  if (red == "none")
    p.reduction = ReductionKind::None;
  else if (red == "sum")
    p.reduction = ReductionKind::Sum;
  else if (red == "mean")
    p.reduction = ReductionKind::Mean;
  else
    return kernelError(call.opType + ": unknown reduction '" + red + "'");
  p.hasIgnoreIndex = call.attrs.has("ignore_index");
  p.ignoreIndex = call.attrs.getInt("ignore_index", 0);

  p.input = call.input(0);
  p.target = call.input(1);
  p.weight = call.input(2);
  p.loss = call.output(0);
  p.logProb = withLogProb ? call.output(1) : nullptr;
  if (!p.input || !p.target || !p.loss)
    return kernelError(call.opType + ": needs input, target and a loss output");
  const TensorRef &in = *p.input, &tgt = *p.target;
  if (!isFloatDType(in.dtype))
    return kernelError("unsupported: " + call.opType + " on " +
                       dtypeName(in.dtype) + " input");
  if (tgt.dtype != DType::I32 && tgt.dtype != DType::I64)
    return kernelError(call.opType + ": target must be int32 or int64, not " +
                       dtypeName(tgt.dtype));
  if (in.rank() < 2)
    return kernelError(call.opType + ": input must be [N, C, ...], it is " +
                       formatShape(in.shape));
  // The target's shape is the input's without the class dimension.
  llvm::SmallVector<int64_t, 6> tshape(in.shape.begin(), in.shape.end());
  tshape.erase(tshape.begin() + 1);
  if (llvm::ArrayRef<int64_t>(tgt.shape) != llvm::ArrayRef<int64_t>(tshape))
    return kernelError(call.opType + ": target shape " +
                       formatShape(tgt.shape) + " does not match input shape " +
                       formatShape(in.shape));
  p.n = in.shape[0];
  p.c = in.shape[1];
  p.d = numElements(llvm::ArrayRef<int64_t>(in.shape).drop_front(2));
  if (p.weight && (p.weight->dtype != in.dtype || p.weight->rank() != 1 ||
                   p.weight->shape[0] != p.c))
    return kernelError(call.opType + ": weight must be a [" + Twine(p.c) +
                       "] " + dtypeName(in.dtype) + " tensor, it is " +
                       dtypeName(p.weight->dtype) +
                       formatShape(p.weight->shape));
  int64_t lossCount =
      p.reduction == ReductionKind::None ? tgt.numElements() : 1;
  if (p.loss->dtype != in.dtype || p.loss->numElements() != lossCount)
    return kernelError(call.opType + ": loss output must hold " +
                       Twine(lossCount) + " " + dtypeName(in.dtype) +
                       " elements, it is " + dtypeName(p.loss->dtype) +
                       formatShape(p.loss->shape));
  if (p.logProb && (p.logProb->dtype != in.dtype ||
                    llvm::ArrayRef<int64_t>(p.logProb->shape) !=
                        llvm::ArrayRef<int64_t>(in.shape)))
    return kernelError(call.opType +
                       ": log_prob output must match the input, "
                       "it is " +
                       dtypeName(p.logProb->dtype) +
                       formatShape(p.logProb->shape));

  // Checked up front so the parallel loops below cannot fail.
  for (int64_t i = 0, e = tgt.numElements(); i < e; ++i) {
    int64_t t = loadIndex(tgt, i);
    if (p.hasIgnoreIndex && t == p.ignoreIndex)
      continue;
    if (t < 0 || t >= p.c)
      return kernelError(call.opType + ": target " + Twine(t) +
                         " at position " + Twine(i) + " is out of range for " +
                         Twine(p.c) + " classes");
  }
  return p;
}

/// Computes one sample n: its log-probabilities (a log-softmax over C when
/// `softmax`, the input itself otherwise), the per-position losses, and
/// the sums of weighted loss and of weights over its positions. `lse` and
/// `maxv` hold the sample's D positions.
template <typename T, typename Tgt>
static void lossForSample(const LossProblem &p, bool softmax, int64_t n,
                          ComputeT<T> *lse, ComputeT<T> *maxv, double &lossSum,
                          double &weightSum) {
  using C = ComputeT<T>;
  const int64_t numC = p.c, numD = p.d;
  const T *x = p.input->as<T>() + n * numC * numD;
  const Tgt *tgt = p.target->as<Tgt>() + n * numD;
  const T *w = p.weight ? p.weight->as<T>() : nullptr;

  // lse[d] = log(sum_c exp(x[c, d])), computed stably around the maximum;
  // the loops run over d innermost so they are contiguous.
  std::fill(lse, lse + numD, C(0));
  if (softmax && numD == 1) {
    // [N, C] (the common language-model case): one contiguous row, through
    // RowMath's vector loops for f32 rows long enough.
    C m = -std::numeric_limits<C>::infinity(), sum = 0;
    bool vector = false;
    if constexpr (std::is_same_v<T, float>) {
      if (numC >= kRowMathMinRow) {
        const RowMath &rm = rowMath();
        m = rm.max(x, numC);
        sum = rm.sumExp(x, numC, m);
        vector = true;
      }
    }
    if (!vector) {
      for (int64_t c = 0; c < numC; ++c)
        m = std::max(m, load(x[c]));
      for (int64_t c = 0; c < numC; ++c)
        sum += std::exp(load(x[c]) - m);
    }
    lse[0] = m + std::log(sum);
    if (p.logProb) {
      T *lp = p.logProb->as<T>() + n * numC;
      for (int64_t c = 0; c < numC; ++c)
        lp[c] = store<T>(load(x[c]) - lse[0]);
    }
  } else if (softmax) {
    std::fill(maxv, maxv + numD, -std::numeric_limits<C>::infinity());
    for (int64_t c = 0; c < numC; ++c)
      for (int64_t d = 0; d < numD; ++d)
        maxv[d] = std::max(maxv[d], load(x[c * numD + d]));
    for (int64_t c = 0; c < numC; ++c)
      for (int64_t d = 0; d < numD; ++d)
        lse[d] += std::exp(load(x[c * numD + d]) - maxv[d]);
    for (int64_t d = 0; d < numD; ++d)
      lse[d] = maxv[d] + std::log(lse[d]);
    if (p.logProb) {
      T *lp = p.logProb->as<T>() + n * numC * numD;
      for (int64_t c = 0; c < numC; ++c)
        for (int64_t d = 0; d < numD; ++d)
          lp[c * numD + d] = store<T>(load(x[c * numD + d]) - lse[d]);
    }
  }

  T *perPosition =
      p.reduction == ReductionKind::None ? p.loss->as<T>() + n * numD : nullptr;
  double sum = 0, wsum = 0;
  for (int64_t d = 0; d < numD; ++d) {
    int64_t t = static_cast<int64_t>(tgt[d]);
    C l = 0, wt = 0;
    if (!(p.hasIgnoreIndex && t == p.ignoreIndex)) {
      wt = w ? load(w[t]) : C(1);
      l = -(load(x[t * numD + d]) - lse[d]) * wt;
    }
    if (perPosition)
      perPosition[d] = store<T>(l);
    sum += static_cast<double>(l);
    wsum += static_cast<double>(wt);
  }
  lossSum = sum;
  weightSum = wsum;
}

/// Pieces of the call's workspace, as kernelWorkspaceBytes counts them.
template <typename T> struct LossScratch {
  ComputeT<T> *lse = nullptr, *maxv = nullptr;
  double *lossSums = nullptr, *weightSums = nullptr;
};

template <typename T>
static llvm::Expected<LossScratch<T>>
takeScratch(const KernelCall &call, const LossProblem &p, bool softmax) {
  LossScratch<T> s;
  int64_t positions = p.n * p.d;
  auto lse = call.scratch<ComputeT<T>>(positions);
  if (!lse)
    return lse.takeError();
  s.lse = *lse;
  if (softmax && p.d > 1) {
    auto maxv = call.scratch<ComputeT<T>>(positions);
    if (!maxv)
      return maxv.takeError();
    s.maxv = *maxv;
  }
  auto sums = call.scratch<double>(p.n);
  if (!sums)
    return sums.takeError();
  auto weights = call.scratch<double>(p.n);
  if (!weights)
    return weights.takeError();
  s.lossSums = *sums;
  s.weightSums = *weights;
  return s;
}

template <typename T, typename Tgt>
static void computeLoss(const LossProblem &p, bool softmax,
                        const LossScratch<T> &s) {
  size_t work = static_cast<size_t>(p.input->byteSize()) * (softmax ? 3 : 1);
  parallelRanges(p.n, work, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n)
      lossForSample<T, Tgt>(p, softmax, n, s.lse + n * p.d,
                            s.maxv ? s.maxv + n * p.d : nullptr, s.lossSums[n],
                            s.weightSums[n]);
  });
  if (p.reduction == ReductionKind::None)
    return;
  double sum = 0, wsum = 0;
  for (int64_t n = 0; n < p.n; ++n) {
    sum += s.lossSums[n];
    wsum += s.weightSums[n];
  }
  // Mean divides by the total weight of the non-ignored positions (their
  // count without weights); all ignored gives 0/0 = NaN, as in PyTorch.
  double result = p.reduction == ReductionKind::Sum ? sum : sum / wsum;
  p.loss->as<T>()[0] = store<T>(result);
}

static Error runLoss(const KernelCall &call, bool softmax) {
  auto problem = readProblem(call, /*withLogProb=*/softmax);
  if (!problem)
    return problem.takeError();
  const LossProblem &p = *problem;
  return visitDType(p.input->dtype, [&](auto tag) -> Error {
    using T = decltype(tag);
    if constexpr (isFloatStorage<T>()) {
      auto s = takeScratch<T>(call, p, softmax);
      if (!s)
        return s.takeError();
      if (p.target->dtype == DType::I64)
        computeLoss<T, int64_t>(p, softmax, *s);
      else
        computeLoss<T, int32_t>(p, softmax, *s);
    }
    return Error::success();
  });
}

Error runSoftmaxCrossEntropyLoss(const KernelCall &call) {
  return runLoss(call, /*softmax=*/true);
}

Error runNegativeLogLikelihoodLoss(const KernelCall &call) {
  return runLoss(call, /*softmax=*/false);
}

} // namespace zinc::cpu
