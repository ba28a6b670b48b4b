//===- Optimizers.cpp - AdamW, Adam and SGD updates, in place -------------===//
//
// torch.optim's single-tensor algorithms (PyTorch 1.13), step for step, so
// that a zinc run and a PyTorch run from the same weights stay together:
// the scalars (bias corrections, step size) are computed in double as Python
// does, the elementwise work in float as PyTorch's CPU kernels do.
//
//===----------------------------------------------------------------------===//
#include "zinc/runtime/cpu/Kernel.h"
#include "zinc/support/Error.h"
#include <cmath>

namespace zinc::cpu {

/// Checks that every operand is f32 with the parameter's element count.
static llvm::Error checkOperands(const KernelCall &call, size_t count) {
  if (call.inputs.size() != count)
    return makeError(call.opType + " expects " + llvm::Twine(count) + " operands");
  int64_t n = call.inputs[0]->numElements();
  for (const TensorRef *t : call.inputs)
    if (!t || t->dtype != DType::F32 || t->numElements() != n)
      return makeError("unsupported: " + call.opType +
                       " on operands that are not all f32 of the parameter's size");
  return llvm::Error::success();
}

static llvm::Error adam(const KernelCall &call, bool decoupled) {
  if (auto err = checkOperands(call, 4))
    return err;
  float *param = call.inputs[0]->as<float>();
  const float *grad = call.inputs[1]->as<float>();
  float *expAvg = call.inputs[2]->as<float>();
  float *expAvgSq = call.inputs[3]->as<float>();
  int64_t n = call.inputs[0]->numElements();
  double lr = call.attrs.getFloat("lr", 1e-3);
  double beta1 = call.attrs.getFloat("beta1", 0.9);
  double beta2 = call.attrs.getFloat("beta2", 0.999);
  double eps = call.attrs.getFloat("eps", 1e-8);
  double wd = call.attrs.getFloat("weight_decay", decoupled ? 1e-2 : 0.0);
  double bias1 = 1 - std::pow(beta1, static_cast<double>(call.step));
  double bias2 = 1 - std::pow(beta2, static_cast<double>(call.step));
  const float decay = static_cast<float>(1 - lr * wd);
  const float b1 = static_cast<float>(beta1), b2 = static_cast<float>(beta2);
  const float oneMinusB1 = static_cast<float>(1 - beta1);
  const float oneMinusB2 = static_cast<float>(1 - beta2);
  const float stepSize = static_cast<float>(lr / bias1);
  const float bias2Sqrt = static_cast<float>(std::sqrt(bias2));
  const float epsF = static_cast<float>(eps);
  const float wdF = static_cast<float>(wd);
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i) {
    float g = grad[i];
    float p = param[i];
    if (decoupled)
      p *= decay;
    else if (wdF != 0)
      g += p * wdF;
    float m = expAvg[i] * b1 + g * oneMinusB1;
    float v = expAvgSq[i] * b2 + g * g * oneMinusB2;
    expAvg[i] = m;
    expAvgSq[i] = v;
    float denom = std::sqrt(v) / bias2Sqrt + epsF;
    param[i] = p - stepSize * (m / denom);
  }
  return llvm::Error::success();
}

llvm::Error runAdamW(const KernelCall &call) { return adam(call, true); }
llvm::Error runAdam(const KernelCall &call) { return adam(call, false); }

llvm::Error runSGD(const KernelCall &call) {
  bool hasMomentum = call.inputs.size() == 3;
  if (auto err = checkOperands(call, hasMomentum ? 3 : 2))
    return err;
  float *param = call.inputs[0]->as<float>();
  const float *grad = call.inputs[1]->as<float>();
  float *buf = hasMomentum ? call.inputs[2]->as<float>() : nullptr;
  int64_t n = call.inputs[0]->numElements();
  const float lr = static_cast<float>(call.attrs.getFloat("lr", 1e-3));
  const float wd = static_cast<float>(call.attrs.getFloat("weight_decay", 0));
  const float momentum = static_cast<float>(call.attrs.getFloat("momentum", 0));
  const float dampening = static_cast<float>(call.attrs.getFloat("dampening", 0));
  const bool nesterov = call.attrs.getInt("nesterov", 0) != 0;
  // PyTorch starts the momentum buffer as a copy of the first gradient.
  const bool firstStep = call.step == 1;
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i) {
    float d = grad[i];
    if (wd != 0)
      d += param[i] * wd;
    if (buf) {
      float b = firstStep ? d : buf[i] * momentum + d * (1 - dampening);
      buf[i] = b;
      d = nesterov ? d + b * momentum : b;
    }
    param[i] -= lr * d;
  }
  return llvm::Error::success();
}

} // namespace zinc::cpu
