//===- TrainingMath.h - Per-element Dropout, Adam and SGD math, host/device ===//
//
// The arithmetic of the cuda Dropout, AdamW/Adam and SGD kernels, written
// once for the GPU and for host tests that compare it with the cpu kernels
// (runtime/cpu/kernels/Dropout.cpp, runtime/optim/CpuAdam.cpp,
// Optimizers.cpp). The float operations are the cpu's, in the cpu's order;
// on the device each is an explicitly rounded intrinsic (__fmul_rn, ...) so
// that nvcc cannot contract a multiply and an add into a fused multiply-add,
// which would round differently from CpuAdam.cpp (built with contraction
// off). The per-step scalars are computed in double, as Python does.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_CUDA_KERNELS_TRAININGMATH_H
#define ZINC_RUNTIME_CUDA_KERNELS_TRAININGMATH_H

#include "HostDevice.h"
#include "zinc/support/LrSchedule.h"
#include "zinc/support/Philox.h"
#include <math.h>
#include <stdint.h>

namespace zinc::cuda {

//===----------------------------------------------------------------------===//
// Float operations that are never fused
//===----------------------------------------------------------------------===//

ZINC_HD float mulRn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
ZINC_HD float addRn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
ZINC_HD float subRn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
ZINC_HD float divRn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
ZINC_HD float sqrtRn(float a) {
#ifdef __CUDA_ARCH__
  return __fsqrt_rn(a);
#else
  return sqrtf(a);
#endif
}

/// GradScaler's inv_scale: the reciprocal in double, rounded to float.
ZINC_HD float invScaleOf(float scale) {
  return static_cast<float>(1.0 / static_cast<double>(scale));
}

/// LossScale's seed: the scale divided by the micro-batch count in float,
/// as autograd divides it through `loss / N` (the cpu's runLossScale).
ZINC_HD float lossScaleSeed(float scale, float divisor) {
  return divRn(scale, divisor);
}

//===----------------------------------------------------------------------===//
// Gradient accumulation
//===----------------------------------------------------------------------===//

/// AccumulateGrad's element (runtime/optim/GradAccumulation.cpp): the first
/// micro-batch stores its gradient, the others add it.
ZINC_HD float accumulateGradAt(float acc, float grad, bool first) {
  return first ? grad : addRn(acc, grad);
}

//===----------------------------------------------------------------------===//
// Dropout
//===----------------------------------------------------------------------===//

/// The keep decision of stream element `index` (this rank's element i is
/// index offset + i): word index % 4 of Philox block index / 4, exactly the
/// cpu's DropoutStream::forEach.
ZINC_HD bool dropoutKeepAt(uint64_t seed, int64_t step, uint32_t seedId,
                           float ratio, uint64_t index) {
  Philox4x32Counter words = dropoutBlock(seed, step, seedId, index / 4);
  return dropoutKeeps(words.v[index % 4], ratio);
}

/// x * keep * scale, left to right in float (the cpu's `load(x) * C(keep) *
/// C(scale)`), so a dropped inf or NaN still gives NaN.
ZINC_HD float dropoutApply(float x, bool keep, float scale) {
  return mulRn(mulRn(x, keep ? 1.0f : 0.0f), scale);
}

//===----------------------------------------------------------------------===//
// Adam and AdamW
//===----------------------------------------------------------------------===//

/// The node's attributes, as the cpu reads them (in double).
struct AdamHyper {
  bool decoupled = true;
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weightDecay = 0;
  /// `lr`'s factor at each update (LrSchedule.h).
  LrSchedule schedule;
};

/// The per-step constants: optim::AdamConstants, field for field.
struct AdamStepConstants {
  bool decoupled;
  float decay, weightDecay, beta1, beta2, oneMinusBeta1, oneMinusBeta2;
  float stepSize, bias2Sqrt, eps;
  bool unscale;
  float invScale;
  /// --clip-grad-norm: clip_grad_norm_'s factor, after unscaling.
  bool clip;
  float clipCoef;
};

/// optim::makeAdamConstants: update number `step` (1-based); `scale` is
/// loss scaling's current scale (a device pointer on the device) or null.
ZINC_HD AdamStepConstants adamStepConstants(const AdamHyper &h, int64_t step,
                                            const float *scale) {
  double bias1 = 1 - pow(h.beta1, static_cast<double>(step));
  double bias2 = 1 - pow(h.beta2, static_cast<double>(step));
  double lr = h.lr * lrFactor(h.schedule, step - 1);
  AdamStepConstants c;
  c.decoupled = h.decoupled;
  c.decay = static_cast<float>(1 - lr * h.weightDecay);
  c.weightDecay = static_cast<float>(h.weightDecay);
  c.beta1 = static_cast<float>(h.beta1);
  c.beta2 = static_cast<float>(h.beta2);
  c.oneMinusBeta1 = static_cast<float>(1 - h.beta1);
  c.oneMinusBeta2 = static_cast<float>(1 - h.beta2);
  c.stepSize = static_cast<float>(lr / bias1);
  c.bias2Sqrt = static_cast<float>(sqrt(bias2));
  c.eps = static_cast<float>(h.eps);
  c.unscale = scale != nullptr;
  c.invScale = scale ? invScaleOf(*scale) : 1.0f;
  c.clip = false;
  c.clipCoef = 1.0f;
  return c;
}

/// One element of optim::adamReferenceSpan: `g` is the gradient as float;
/// p, m and v are updated in place.
ZINC_HD void adamUpdate(const AdamStepConstants &c, float g, float &p,
                        float &m, float &v) {
  if (c.unscale)
    g = mulRn(g, c.invScale);
  if (c.clip)
    g = mulRn(g, c.clipCoef);
  if (c.decoupled)
    p = mulRn(p, c.decay);
  else if (c.weightDecay != 0)
    g = addRn(g, mulRn(p, c.weightDecay));
  m = addRn(mulRn(m, c.beta1), mulRn(g, c.oneMinusBeta1));
  v = addRn(mulRn(v, c.beta2), mulRn(mulRn(g, g), c.oneMinusBeta2));
  float denom = addRn(divRn(sqrtRn(v), c.bias2Sqrt), c.eps);
  p = subRn(p, mulRn(c.stepSize, divRn(m, denom)));
}

//===----------------------------------------------------------------------===//
// SGD
//===----------------------------------------------------------------------===//

/// runSGD's constants, rounded to float as the cpu rounds them.
struct SgdConstants {
  float lr = 1e-3f, weightDecay = 0, momentum = 0, dampening = 0;
  bool nesterov = false;
  bool unscale = false;
  float invScale = 1;
  bool clip = false;
  float clipCoef = 1;
};

/// runSGD's rate of update number `step` (1-based): the node's `lr` times
/// the schedule's factor, rounded to float.
ZINC_HD float sgdLr(double lr, const LrSchedule &schedule, int64_t step) {
  return static_cast<float>(lr * lrFactor(schedule, step - 1));
}

/// One element of the cpu's runSGD: returns the new parameter; with a
/// momentum buffer (`buf` non-null) updates it, starting it as a copy of
/// the first step's gradient as PyTorch does.
ZINC_HD float sgdUpdate(const SgdConstants &c, float g, float p, float *buf,
                        bool firstStep) {
  float d = g;
  if (c.unscale)
    d = mulRn(d, c.invScale);
  if (c.clip)
    d = mulRn(d, c.clipCoef);
  if (c.weightDecay != 0)
    d = addRn(d, mulRn(p, c.weightDecay));
  if (buf) {
    float b = firstStep ? d
                        : addRn(mulRn(*buf, c.momentum),
                                mulRn(d, subRn(1.0f, c.dampening)));
    *buf = b;
    d = c.nesterov ? addRn(d, mulRn(b, c.momentum)) : b;
  }
  return subRn(p, mulRn(c.lr, d));
}

/// torch.optim's state['step'] of this update: the applied-step count (loss
/// scaling's, which skipped steps do not advance) or the run's step, less a
/// delayed update's delay.
ZINC_HD int64_t optimizerStep(int64_t runStep, const int64_t *applied,
                              int64_t delayed) {
  return (applied ? *applied + 1 : runStep) - delayed;
}

} // namespace zinc::cuda

#endif
