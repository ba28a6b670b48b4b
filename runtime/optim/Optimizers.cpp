//===- Optimizers.cpp - AdamW, Adam and SGD updates, in place -------------===//
//
// torch.optim's single-tensor algorithms (PyTorch 1.13), step for step, so
// that a zinc run and a PyTorch run from the same weights stay together:
// the scalars (bias corrections, step size) are computed in double as Python
// does, the elementwise work in float as PyTorch's CPU kernels do. Under
// mixed precision the gradient may be f16/bf16 (read as float, unscaled by
// GradScaler's inv_scale under fp16 loss scaling) and the update also writes
// the parameter's compute-precision copy.
//
//===----------------------------------------------------------------------===//
#include "zinc/runtime/cpu/Kernel.h"
#include "zinc/runtime/cpu/Parallel.h"
#include "zinc/runtime/optim/CpuAdam.h"
#include "zinc/support/Error.h"
#include "zinc/support/Float16.h"
#include "zinc/support/GradClipping.h"
#include "zinc/support/LrSchedule.h"
#include <cmath>

namespace zinc::cpu {

/// What an update reads besides (param, grad, states): mixed precision's
/// compute-precision copy, which it writes, fp16 loss scaling's found-inf
/// flag, scale and count of applied steps, and gradient clipping's sum of
/// squares (operands `first`.. in that order, OptimizerOps.h; absent ones
/// are null or missing).
struct Extras {
  TensorRef *copy = nullptr;
  const float *foundInf = nullptr;
  const float *scale = nullptr;
  const int64_t *applied = nullptr;
  const float *gradSumSquares = nullptr;
  float maxGradNorm = 0;
  /// A delayed update (--dpu, the `delayed_steps` attribute) applies the
  /// gradients of this many steps before: the first steps have none.
  int64_t delayed = 0;
  /// The node's learning-rate schedule (LrSchedule.h).
  LrSchedule schedule;

  /// GradScaler skips optimizer.step() on an overflow: nothing changes.
  /// A delayed update has nothing to apply before its first gradient.
  bool skip(const KernelCall &call) const {
    return (foundInf && *foundInf != 0) || call.step <= delayed;
  }
  /// torch.optim's state['step'] counts the updates done, skipped steps not.
  /// A delayed update's applied steps were counted when its gradients
  /// were judged, a step before it runs.
  int64_t step(const KernelCall &call) const {
    return (applied ? *applied + 1 : call.step) - delayed;
  }
  /// The rate of this update: `lr` times the schedule's factor, which
  /// counts the updates applied before it (Trainer steps its scheduler
  /// after each optimizer step that ran).
  double lr(const KernelCall &call) const {
    return call.attrs.getFloat("lr", 1e-3) * lrFactor(schedule, step(call) - 1);
  }
  /// GradScaler's inv_scale: the reciprocal in double, rounded to float.
  float invScale() const { return scale ? static_cast<float>(1.0 / *scale) : 1.0f; }
  /// clip_grad_norm_'s factor of the unscaled gradient (1 without clipping).
  float clipCoef() const {
    return gradSumSquares ? clipCoefficient(*gradSumSquares, maxGradNorm) : 1.0f;
  }
};

static bool isScalar(const TensorRef *t, DType dtype) {
  return t && t->dtype == dtype && t->numElements() == 1;
}

/// Checks the operands: param and states f32 of one size, the gradient f32,
/// f16 or bf16 of that size, then the extras; `states` may hold null
/// (SGD without momentum).
static llvm::Expected<Extras> checkOperands(const KernelCall &call, size_t states) {
  size_t first = 2 + states;
  if (call.inputs.size() < first || call.inputs.size() > first + 5)
    return makeError(call.opType + " expects " + llvm::Twine(first) + " to " +
                     llvm::Twine(first + 5) + " operands");
  const TensorRef *param = call.inputs[0], *grad = call.inputs[1];
  int64_t n = param ? param->numElements() : 0;
  bool ok = param && param->dtype == DType::F32 && grad && grad->numElements() == n &&
            (grad->dtype == DType::F32 || grad->dtype == DType::F16 ||
             grad->dtype == DType::BF16);
  for (size_t i = 2; i < first; ++i)
    ok &= !call.inputs[i] ||
          (call.inputs[i]->dtype == DType::F32 && call.inputs[i]->numElements() == n);
  if (!ok)
    return makeError("unsupported: " + call.opType +
                     " on a parameter and states that are not all f32 of one size, "
                     "or a gradient that is not f32, f16 or bf16 of that size");
  Extras e;
  e.delayed = call.attrs.getInt("delayed_steps", 0);
  if (e.delayed < 0)
    return makeError(call.opType + ": delayed_steps must not be negative");
  auto schedule = lrScheduleFromAttrs(call.attrs);
  if (!schedule)
    return makeError(call.opType + ": " + llvm::toString(schedule.takeError()));
  e.schedule = *schedule;
  const TensorRef *copy = call.input(first);
  if (copy) {
    if ((copy->dtype != DType::F16 && copy->dtype != DType::BF16) ||
        copy->numElements() != n)
      return makeError(call.opType + ": operand " + llvm::Twine(first) +
                       " (the compute copy) must be f16 or bf16 of the parameter's size");
    e.copy = call.updated(first);
    if (!e.copy)
      return makeError(call.opType + ": operand " + llvm::Twine(first) +
                       " (the compute copy) is not declared written (Ops.def)");
  }
  const TensorRef *foundInf = call.input(first + 1), *scale = call.input(first + 2),
                  *applied = call.input(first + 3);
  if (foundInf || scale || applied) {
    if (!isScalar(foundInf, DType::F32) || !isScalar(scale, DType::F32) ||
        !isScalar(applied, DType::I64))
      return makeError(call.opType + ": loss scaling operands must be found_inf f32[], "
                                     "scale f32[] and the applied-step count i64[]");
    e.foundInf = foundInf->as<float>();
    e.scale = scale->as<float>();
    e.applied = applied->as<int64_t>();
  }
  if (const TensorRef *sum = call.input(first + 4)) {
    e.maxGradNorm = static_cast<float>(call.attrs.getFloat("max_grad_norm", 0));
    if (!isScalar(sum, DType::F32) || !(e.maxGradNorm > 0))
      return makeError(call.opType + ": gradient clipping needs the sum of squares f32[] "
                                     "and a max_grad_norm > 0");
    e.gradSumSquares = sum->as<float>();
  }
  return e;
}

/// Calls fn(readGrad) with readGrad(i) element i of the gradient as float.
template <typename Fn> static void withGradReader(const TensorRef &grad, Fn &&fn) {
  switch (grad.dtype) {
  case DType::F16: {
    const uint16_t *g = grad.as<uint16_t>();
    fn([g](int64_t i) { return halfToFloat(g[i]); });
    return;
  }
  case DType::BF16: {
    const uint16_t *g = grad.as<uint16_t>();
    fn([g](int64_t i) { return bf16ToFloat(g[i]); });
    return;
  }
  default: {
    const float *g = grad.as<float>();
    fn([g](int64_t i) { return g[i]; });
    return;
  }
  }
}

/// Writes the updated fp32 parameter into the compute copy (round to
/// nearest even), in the same pass over memory as the update.
static inline void storeCopy(TensorRef *copy, int64_t i, float p) {
  if (!copy)
    return;
  copy->as<uint16_t>()[i] =
      copy->dtype == DType::F16 ? floatToHalf(p) : floatToBf16(p);
}

static optim::FloatFormat floatFormat(DType dtype) {
  return dtype == DType::F16    ? optim::FloatFormat::F16
         : dtype == DType::BF16 ? optim::FloatFormat::BF16
                                : optim::FloatFormat::F32;
}

/// The update itself is optim::cpuAdam (CpuAdam.cpp): the vector kernel of
/// the widest ISA the CPU has, with the same float operations in the same
/// order as this file's loops, so results do not depend on the ISA.
static llvm::Error adam(const KernelCall &call, bool decoupled) {
  auto extras = checkOperands(call, 2);
  if (!extras)
    return extras.takeError();
  if (extras->skip(call))
    return llvm::Error::success();
  double lr = extras->lr(call);
  double beta1 = call.attrs.getFloat("beta1", 0.9);
  double beta2 = call.attrs.getFloat("beta2", 0.999);
  double eps = call.attrs.getFloat("eps", 1e-8);
  double wd = call.attrs.getFloat("weight_decay", decoupled ? 1e-2 : 0.0);
  optim::AdamConstants constants = optim::makeAdamConstants(
      decoupled, lr, beta1, beta2, eps, wd, extras->step(call), extras->scale);
  constants.clip = extras->gradSumSquares != nullptr;
  constants.clipCoef = extras->clipCoef();
  optim::AdamBuffers buffers;
  TensorRef *param = call.updated(0), *expAvg = call.updated(2), *expAvgSq = call.updated(3);
  if (!param || !expAvg || !expAvgSq)
    return makeError(call.opType + ": the parameter and moments are not declared written "
                                   "(Ops.def)");
  buffers.param = param->as<float>();
  buffers.grad = call.inputs[1]->data;
  buffers.gradFormat = floatFormat(call.inputs[1]->dtype);
  buffers.expAvg = expAvg->as<float>();
  buffers.expAvgSq = expAvgSq->as<float>();
  if (extras->copy) {
    buffers.copy = extras->copy->as<uint16_t>();
    buffers.copyFormat = floatFormat(extras->copy->dtype);
  }
  optim::cpuAdam(constants, buffers, call.inputs[0]->numElements());
  return llvm::Error::success();
}

llvm::Error runAdamW(const KernelCall &call) { return adam(call, true); }
llvm::Error runAdam(const KernelCall &call) { return adam(call, false); }

llvm::Error runSGD(const KernelCall &call) {
  // (param, grad) or (param, grad, momentum_buffer | none, extras...).
  auto extras = checkOperands(call, call.inputs.size() > 2 ? 1 : 0);
  if (!extras)
    return extras.takeError();
  if (extras->skip(call))
    return llvm::Error::success();
  TensorRef *paramRef = call.updated(0);
  if (!paramRef)
    return makeError(call.opType + ": the parameter is not declared written (Ops.def)");
  float *param = paramRef->as<float>();
  TensorRef *bufRef = call.input(2) ? call.updated(2) : nullptr;
  if (call.input(2) && !bufRef)
    return makeError(call.opType + ": the momentum buffer is not declared written (Ops.def)");
  float *buf = bufRef ? bufRef->as<float>() : nullptr;
  TensorRef *copy = extras->copy;
  int64_t n = call.inputs[0]->numElements();
  const float lr = static_cast<float>(extras->lr(call));
  const float wd = static_cast<float>(call.attrs.getFloat("weight_decay", 0));
  const float momentum = static_cast<float>(call.attrs.getFloat("momentum", 0));
  const float dampening = static_cast<float>(call.attrs.getFloat("dampening", 0));
  const bool nesterov = call.attrs.getInt("nesterov", 0) != 0;
  // PyTorch starts the momentum buffer as a copy of the first gradient.
  const bool firstStep = extras->step(call) == 1;
  const bool unscale = extras->scale != nullptr;
  const float inv = extras->invScale();
  const bool clip = extras->gradSumSquares != nullptr;
  const float clipCoef = extras->clipCoef();
  withGradReader(*call.inputs[1], [&](auto readGrad) {
    parallelFor(n, n > (1 << 16), [&](int64_t i) {
      float d = readGrad(i);
      if (unscale)
        d *= inv;
      if (clip)
        d *= clipCoef;
      if (wd != 0)
        d += param[i] * wd;
      if (buf) {
        float b = firstStep ? d : buf[i] * momentum + d * (1 - dampening);
        buf[i] = b;
        d = nesterov ? d + b * momentum : b;
      }
      float p = param[i] - lr * d;
      param[i] = p;
      storeCopy(copy, i, p);
    });
  });
  return llvm::Error::success();
}

} // namespace zinc::cpu
