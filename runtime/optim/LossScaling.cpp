//===- LossScaling.cpp - fp16 dynamic loss scaling, GradScaler's way ------===//
//
// torch.cuda.amp.GradScaler (PyTorch 1.13) as three in-place ops over its
// state: the scale (f32[]; 0 until the first step, which starts it at
// init_scale, as GradScaler initialises lazily), the growth tracker (i64[]),
// the found-inf flag (f32[]) and the count of applied optimizer steps (i64[],
// torch.optim's state['step'], which a skipped step does not advance).
// With gradient accumulation the loss gradient is scale / N (PyTorch's
// scaler.scale(loss / N).backward()), and an overflow in any micro-batch
// skips the optimizer step.
//
//===----------------------------------------------------------------------===//
#include "zinc/runtime/cpu/Kernel.h"
#include "zinc/runtime/cpu/Parallel.h"
#include "zinc/support/Error.h"
#include "zinc/support/Float16.h"
#include <cmath>

namespace zinc::cpu {

static bool isScalar(const TensorRef *t, DType dtype) {
  return t && t->dtype == dtype && t->numElements() == 1;
}

/// LossScale(scale) {divisor} -> seed: the loss gradient, the current scale
/// divided in float by `divisor` (default 1; the micro-batch count with
/// gradient accumulation), as autograd divides it through loss / N.
llvm::Error runLossScale(const KernelCall &call) {
  TensorRef *scale = call.updated(0);
  TensorRef *seed = call.output(0);
  if (!isScalar(scale, DType::F32) || !seed || seed->numElements() != 1)
    return makeError("LossScale expects the scale f32[] (declared written) and one "
                     "output element");
  float &s = *scale->as<float>();
  if (s == 0)
    s = static_cast<float>(call.attrs.getFloat("init_scale", 65536.0));
  const float divisor = static_cast<float>(call.attrs.getFloat("divisor", 1.0));
  if (!(divisor > 0))
    return makeError("LossScale: divisor " +
                     llvm::Twine(std::to_string(divisor)) + " is not positive");
  const float v = s / divisor;
  switch (seed->dtype) {
  case DType::F32: *seed->as<float>() = v; break;
  case DType::F64: *seed->as<double>() = v; break;
  case DType::F16: *seed->as<uint16_t>() = floatToHalf(v); break;
  case DType::BF16: *seed->as<uint16_t>() = floatToBf16(v); break;
  default: return makeError("LossScale: the seed must be a float");
  }
  return llvm::Error::success();
}

/// Whether value(i) is inf or NaN for some i in [0, n).
template <typename Fn> static bool anyNotFinite(int64_t n, Fn &&value) {
  int bad = 0;
  if (useThreads(n > (1 << 16))) {
#pragma omp parallel for reduction(| : bad)
    for (int64_t i = 0; i < n; ++i)
      bad |= !std::isfinite(value(i));
  } else {
    for (int64_t i = 0; i < n; ++i)
      bad |= !std::isfinite(value(i));
  }
  return bad != 0;
}

/// CheckFiniteGrads(found_inf, scale, grads...): found_inf = 1 when any
/// gradient, unscaled in f32 as GradScaler.unscale_ does, is inf or NaN,
/// else 0; with `accumulate`, found_inf stays 1 once set (one check per
/// gradient, the first one setting the flag, the others ORing into it).
/// With gradient accumulation the first check resets the flag only in an
/// optimizer step's first micro-batch and ORs in the others.
llvm::Error runCheckFiniteGrads(const KernelCall &call) {
  if (call.inputs.size() < 2 || !isScalar(call.inputs[0], DType::F32) ||
      !isScalar(call.inputs[1], DType::F32))
    return makeError("CheckFiniteGrads expects found_inf f32[], scale f32[], grads...");
  const float inv = static_cast<float>(1.0 / *call.inputs[1]->as<float>());
  bool keep = call.attrs.getInt("accumulate", 0) != 0 || call.microBatch > 0;
  bool found = keep && *call.inputs[0]->as<float>() != 0;
  for (size_t k = 2; k < call.inputs.size() && !found; ++k) {
    const TensorRef *g = call.inputs[k];
    if (!g)
      continue;
    int64_t n = g->numElements();
    bool bad = false;
    switch (g->dtype) {
    case DType::F32: {
      const float *p = g->as<float>();
      bad = anyNotFinite(n, [&](int64_t i) { return p[i] * inv; });
      break;
    }
    case DType::F16: {
      const uint16_t *p = g->as<uint16_t>();
      bad = anyNotFinite(n, [&](int64_t i) { return halfToFloat(p[i]) * inv; });
      break;
    }
    case DType::BF16: {
      const uint16_t *p = g->as<uint16_t>();
      bad = anyNotFinite(n, [&](int64_t i) { return bf16ToFloat(p[i]) * inv; });
      break;
    }
    default:
      return makeError("CheckFiniteGrads: gradient " + llvm::Twine(k - 2) +
                       " is not f32, f16 or bf16");
    }
    found = bad;
  }
  TensorRef *flag = call.updated(0);
  if (!flag)
    return makeError("CheckFiniteGrads: found_inf is not declared written (Ops.def)");
  *flag->as<float>() = found ? 1.0f : 0.0f;
  return llvm::Error::success();
}

/// UpdateLossScale(scale, growth_tracker, found_inf, applied_steps):
/// torch._amp_update_scale_, and one more applied step unless skipped.
llvm::Error runUpdateLossScale(const KernelCall &call) {
  if (call.inputs.size() != 4 || !isScalar(call.inputs[0], DType::F32) ||
      !isScalar(call.inputs[1], DType::I64) || !isScalar(call.inputs[2], DType::F32) ||
      !isScalar(call.inputs[3], DType::I64))
    return makeError("UpdateLossScale expects scale f32[], growth_tracker i64[], "
                     "found_inf f32[], applied steps i64[]");
  TensorRef *scaleRef = call.updated(0), *trackerRef = call.updated(1),
            *appliedRef = call.updated(3);
  if (!scaleRef || !trackerRef || !appliedRef)
    return makeError("UpdateLossScale: scale, growth tracker and applied steps are not "
                     "declared written (Ops.def)");
  float &scale = *scaleRef->as<float>();
  int64_t &tracker = *trackerRef->as<int64_t>();
  bool foundInf = *call.inputs[2]->as<float>() != 0;
  int64_t &applied = *appliedRef->as<int64_t>();
  const double growth = call.attrs.getFloat("growth_factor", 2.0);
  const double backoff = call.attrs.getFloat("backoff_factor", 0.5);
  const int64_t interval = call.attrs.getInt("growth_interval", 2000);
  if (foundInf) {
    scale = static_cast<float>(scale * backoff);
    tracker = 0;
    return llvm::Error::success();
  }
  ++applied;
  int64_t successful = tracker + 1;
  if (successful == interval) {
    float grown = static_cast<float>(scale * growth);
    if (std::isfinite(grown)) // GradScaler never grows the scale to inf.
      scale = grown;
    tracker = 0;
  } else {
    tracker = successful;
  }
  return llvm::Error::success();
}

} // namespace zinc::cpu
