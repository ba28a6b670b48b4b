//===- LossGrad.cpp - Gradients of SoftmaxCrossEntropyLoss and NLL loss ---===//
//
// Both losses are -w[t] * logp[t] at every position (n, d1..dk) of a
// [N, C, d1..dk] input, so both gradients start from one coefficient per
// position, a = -dloss * w[t] / denominator (0 where the target is
// ignored), with the mean's denominator the total weight of the
// non-ignored targets, as the forward kernel (Loss.cpp) and PyTorch divide.
// NLL scatters a at the target class; SoftmaxCrossEntropyLoss takes it, plus
// any gradient G flowing into log_prob, back through the log-softmax:
//   dscores = G + a * onehot(t) - softmax * (sum_c G + a).
//
// Sums are in double; each sample n is independent, so the result does not
// depend on the number of threads. Per-position values (the coefficients,
// log-sum-exp, ...) live in the call's workspace, indexed by position.
//
//===----------------------------------------------------------------------===//
#include "../KernelUtil.h"
#include "../Kernels.h"
#include "zinc/runtime/cpu/RowMath.h"
#include "llvm/ADT/Twine.h"
#include <algorithm>
#include <cmath>
#include <limits>

using llvm::Twine;

namespace zinc::cpu {

namespace {
/// A loss gradient: what the attributes and operands say.
struct LossGradProblem {
  bool reduceNone = false;
  bool hasIgnoreIndex = false;
  int64_t ignoreIndex = 0;
  /// [N, C, D] with D the product of d1..dk (1 without them).
  int64_t n = 0, c = 0, d = 0;
  const TensorRef *dloss = nullptr, *target = nullptr, *weight = nullptr;
  TensorRef *dx = nullptr;
  /// The coefficient a of every position [N * D], in double (workspace).
  double *coef = nullptr;
};
} // namespace

/// Validates the operands against the output [N, C, d1..dk] and computes the
/// per-position coefficients.
static llvm::Expected<LossGradProblem>
readProblem(const KernelCall &call, const TensorRef *dloss,
            const TensorRef *target, const TensorRef *weight, TensorRef *dx) {
  LossGradProblem p;
  llvm::StringRef red = call.attrs.getString("reduction", "mean");
  if (red != "none" && red != "sum" && red != "mean")
    return kernelError(call.opType + ": unknown reduction '" + red + "'");
  p.reduceNone = red == "none";
  p.hasIgnoreIndex = call.attrs.has("ignore_index");
  p.ignoreIndex = call.attrs.getInt("ignore_index", 0);
  if (!dloss || !target || !dx)
    return kernelError(call.opType + ": needs dloss, target and an output");
  if (!isFloatDType(dx->dtype) || dx->rank() < 2)
    return kernelError(call.opType +
                       ": output must be a float [N, C, ...], "
                       "it is " +
                       dtypeName(dx->dtype) + formatShape(dx->shape));
  if (target->dtype != DType::I32 && target->dtype != DType::I64)
    return kernelError(call.opType + ": target must be int32 or int64, not " +
                       dtypeName(target->dtype));
  llvm::SmallVector<int64_t, 6> tshape(dx->shape.begin(), dx->shape.end());
  tshape.erase(tshape.begin() + 1);
  if (llvm::ArrayRef<int64_t>(target->shape) != llvm::ArrayRef<int64_t>(tshape))
    return kernelError(call.opType + ": target shape " +
                       formatShape(target->shape) +
                       " does not match input shape " + formatShape(dx->shape));
  p.n = dx->shape[0];
  p.c = dx->shape[1];
  p.d = numElements(llvm::ArrayRef<int64_t>(dx->shape).drop_front(2));
  int64_t positions = p.n * p.d;
  if (dloss->dtype != dx->dtype ||
      dloss->numElements() != (p.reduceNone ? positions : 1))
    return kernelError(call.opType + ": dloss is " + dtypeName(dloss->dtype) +
                       formatShape(dloss->shape) + ", expected " +
                       Twine(p.reduceNone ? positions : 1) + " " +
                       dtypeName(dx->dtype) + " elements");
  if (weight && (weight->dtype != dx->dtype || weight->rank() != 1 ||
                 weight->shape[0] != p.c))
    return kernelError(call.opType + ": weight must be a [" + Twine(p.c) +
                       "] " + dtypeName(dx->dtype) + " tensor, it is " +
                       dtypeName(weight->dtype) + formatShape(weight->shape));

  // Checked up front so the loops below, parallel ones included, cannot fail.
  for (int64_t i = 0; i < positions; ++i) {
    int64_t t = loadIndex(*target, i);
    if (!(p.hasIgnoreIndex && t == p.ignoreIndex) && (t < 0 || t >= p.c))
      return kernelError(call.opType + ": target " + Twine(t) +
                         " at position " + Twine(i) + " is out of range for " +
                         Twine(p.c) + " classes");
  }
  // Ignored positions get no gradient at all (not 0/0 when every target is
  // ignored), as in PyTorch.
  auto coef = call.scratch<double>(positions);
  if (!coef)
    return coef.takeError();
  p.coef = *coef;
  std::fill(p.coef, p.coef + positions, 0.0);
  double denominator = 0;
  visitDType(dx->dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (isFloatStorage<T>()) {
      const T *pw = weight ? weight->as<const T>() : nullptr;
      const T *pg = dloss->as<const T>();
      for (int64_t i = 0; i < positions; ++i) {
        int64_t t = loadIndex(*target, i);
        if (p.hasIgnoreIndex && t == p.ignoreIndex)
          continue;
        double w = pw ? static_cast<double>(load(pw[t])) : 1.0;
        p.coef[i] = -static_cast<double>(load(pg[p.reduceNone ? i : 0])) * w;
        denominator += w;
      }
    }
  });
  if (red == "mean")
    for (int64_t i = 0; i < positions; ++i) {
      int64_t t = loadIndex(*target, i);
      if (!(p.hasIgnoreIndex && t == p.ignoreIndex))
        p.coef[i] /= denominator;
    }
  p.dloss = dloss;
  p.target = target;
  p.weight = weight;
  p.dx = dx;
  return p;
}

/// Inputs (dloss, target, [weight]), output dinput.
llvm::Error runNegativeLogLikelihoodLossGrad(const KernelCall &call) {
  auto problem = readProblem(call, call.input(0), call.input(1), call.input(2),
                             call.output(0));
  if (!problem)
    return problem.takeError();
  const LossGradProblem &p = *problem;
  visitDType(p.dx->dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (isFloatStorage<T>()) {
      T *out = p.dx->as<T>();
      int64_t sample = p.c * p.d;
      parallelRanges(p.n, p.dx->byteSize(), [&](int64_t begin, int64_t end) {
        std::fill(out + begin * sample, out + end * sample, store<T>(0.0));
        for (int64_t n = begin; n < end; ++n)
          for (int64_t k = 0; k < p.d; ++k) {
            int64_t i = n * p.d + k;
            int64_t t = loadIndex(*p.target, i);
            if (!(p.hasIgnoreIndex && t == p.ignoreIndex))
              out[(n * p.c + t) * p.d + k] = store<T>(p.coef[i]);
          }
      });
    }
  });
  return llvm::Error::success();
}

/// One sample n of SoftmaxCrossEntropyLossGrad; loops run over the D
/// positions innermost so they stay contiguous.
template <typename T>
static void sceGradSample(const LossGradProblem &p, const T *in, bool isLogProb,
                          const T *dlp, int64_t n, double *lse, double *sumG,
                          int64_t *target, double *maxv) {
  using C = ComputeT<T>;
  const int64_t numC = p.c, numD = p.d;
  const T *x = in + n * numC * numD;
  const T *gIn = dlp ? dlp + n * numC * numD : nullptr;
  T *out = p.dx->as<T>() + n * numC * numD;
  const double *coef = p.coef + n * numD;

  if constexpr (std::is_same_v<T, float>) {
    if (numD == 1 && !gIn && numC >= kRowMathMinRow) {
      // [N, C] in f32 without a log_prob gradient: dx = coef (onehot -
      // softmax), RowMath's vector loops.
      const RowMath &rm = rowMath();
      float l = 0;
      if (!isLogProb) {
        float m = rm.max(x, numC);
        l = m + std::log(rm.sumExp(x, numC, m));
      }
      rm.expScale(x, out, numC, l, static_cast<float>(-coef[0]));
      int64_t t = loadIndex(*p.target, n);
      if (!(p.hasIgnoreIndex && t == p.ignoreIndex))
        out[t] += static_cast<float>(coef[0]);
      return;
    }
  }
  // log_prob = x - lse, with lse = 0 when x already is log_prob.
  std::fill(lse, lse + numD, 0.0);
  if (!isLogProb) {
    std::fill(maxv, maxv + numD, -std::numeric_limits<double>::infinity());
    for (int64_t c = 0; c < numC; ++c)
      for (int64_t k = 0; k < numD; ++k)
        maxv[k] = std::max(maxv[k], static_cast<double>(load(x[c * numD + k])));
    for (int64_t c = 0; c < numC; ++c)
      for (int64_t k = 0; k < numD; ++k)
        lse[k] +=
            std::exp(static_cast<double>(load(x[c * numD + k])) - maxv[k]);
    for (int64_t k = 0; k < numD; ++k)
      lse[k] = maxv[k] + std::log(lse[k]);
  }
  // sum_c G + a, the weight of the softmax term.
  std::copy(coef, coef + numD, sumG);
  if (gIn)
    for (int64_t c = 0; c < numC; ++c)
      for (int64_t k = 0; k < numD; ++k)
        sumG[k] += static_cast<double>(load(gIn[c * numD + k]));

  for (int64_t k = 0; k < numD; ++k) {
    int64_t t = loadIndex(*p.target, n * numD + k);
    target[k] = p.hasIgnoreIndex && t == p.ignoreIndex ? -1 : t;
  }
  for (int64_t c = 0; c < numC; ++c)
    for (int64_t k = 0; k < numD; ++k) {
      int64_t j = c * numD + k;
      C lp = load(x[j]) - static_cast<C>(lse[k]);
      C v = -std::exp(lp) * static_cast<C>(sumG[k]);
      if (gIn)
        v += load(gIn[j]);
      if (c == target[k])
        v += static_cast<C>(coef[k]);
      out[j] = store<T>(v);
    }
}

/// Inputs (dloss, log_prob or scores, target, [weight], [dlog_prob]),
/// output dscores; attribute log_prob (1: input 1 is log_prob, 0: it is
/// the scores and the log-softmax is recomputed here), reduction and
/// ignore_index as on the forward node.
llvm::Error runSoftmaxCrossEntropyLossGrad(const KernelCall &call) {
  auto problem = readProblem(call, call.input(0), call.input(2), call.input(3),
                             call.output(0));
  if (!problem)
    return problem.takeError();
  const LossGradProblem &p = *problem;
  const TensorRef *in = call.input(1), *dlp = call.input(4);
  auto matchesOutput = [&](const TensorRef *t) {
    return t && t->dtype == p.dx->dtype && t->shape == p.dx->shape;
  };
  if (!matchesOutput(in) || (dlp && !matchesOutput(dlp)))
    return kernelError(call.opType +
                       ": log_prob (or scores) and its gradient must be " +
                       dtypeName(p.dx->dtype) + formatShape(p.dx->shape));
  bool isLogProb = call.attrs.getInt("log_prob", 0) != 0;
  // lse, sumG, target and (for scores) the maximum, per position.
  int64_t positions = p.n * p.d;
  auto lse = call.scratch<double>(positions);
  if (!lse)
    return lse.takeError();
  auto sumG = call.scratch<double>(positions);
  if (!sumG)
    return sumG.takeError();
  auto target = call.scratch<int64_t>(positions);
  if (!target)
    return target.takeError();
  auto maxv = call.scratch<double>(isLogProb ? 0 : positions);
  if (!maxv)
    return maxv.takeError();
  visitDType(p.dx->dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (isFloatStorage<T>()) {
      const T *pin = in->as<const T>();
      const T *pg = dlp ? dlp->as<const T>() : nullptr;
      size_t work = p.dx->byteSize() * (isLogProb ? 2 : 4);
      parallelRanges(p.n, work, [&](int64_t begin, int64_t end) {
        for (int64_t n = begin; n < end; ++n) {
          int64_t at = n * p.d;
          sceGradSample<T>(p, pin, isLogProb, pg, n, *lse + at, *sumG + at,
                           *target + at, isLogProb ? nullptr : *maxv + at);
        }
      });
    }
  });
  return llvm::Error::success();
}

} // namespace zinc::cpu
