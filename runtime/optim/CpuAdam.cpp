//===- CpuAdam.cpp - CPU Adam/AdamW: reference, ISA choice, OpenMP tiles --===//
//
// The scalar reference is torch.optim's single-tensor Adam/AdamW as PyTorch
// 1.13's CPU kernels do it in float; the vector kernels (CpuAdamAvx2.cpp,
// CpuAdamAvx512.cpp) repeat it operation for operation, so all three give
// the same bits (test/unit/optim/CpuAdamTest.cpp checks it). Contraction
// into fused multiply-adds is off here too, for builds with -march=native.
//
//===----------------------------------------------------------------------===//
#include "zinc/runtime/optim/CpuAdam.h"
#include "zinc/runtime/cpu/Parallel.h"
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

#if defined(__clang__)
#pragma clang fp contract(off)
#else
#pragma GCC optimize("fp-contract=off")
#endif

namespace zinc::optim {

AdamConstants makeAdamConstants(bool decoupled, double lr, double beta1,
                                double beta2, double eps, double weightDecay,
                                int64_t step, const float *scale) {
  double bias1 = 1 - std::pow(beta1, static_cast<double>(step));
  double bias2 = 1 - std::pow(beta2, static_cast<double>(step));
  AdamConstants c;
  c.decoupled = decoupled;
  c.decay = static_cast<float>(1 - lr * weightDecay);
  c.weightDecay = static_cast<float>(weightDecay);
  c.beta1 = static_cast<float>(beta1);
  c.beta2 = static_cast<float>(beta2);
  c.oneMinusBeta1 = static_cast<float>(1 - beta1);
  c.oneMinusBeta2 = static_cast<float>(1 - beta2);
  c.stepSize = static_cast<float>(lr / bias1);
  c.bias2Sqrt = static_cast<float>(std::sqrt(bias2));
  c.eps = static_cast<float>(eps);
  c.unscale = scale != nullptr;
  // GradScaler's inv_scale: the reciprocal in double, rounded to float.
  c.invScale = scale ? static_cast<float>(1.0 / *scale) : 1.0f;
  return c;
}

static inline float loadGrad(const AdamBuffers &b, int64_t i) {
  switch (b.gradFormat) {
  case FloatFormat::F16:
    return halfToFloat(static_cast<const uint16_t *>(b.grad)[i]);
  case FloatFormat::BF16:
    return bf16ToFloat(static_cast<const uint16_t *>(b.grad)[i]);
  case FloatFormat::F32:
    break;
  }
  return static_cast<const float *>(b.grad)[i];
}

void adamReferenceSpan(const AdamConstants &c, const AdamBuffers &b,
                       int64_t begin, int64_t end) {
  const bool l2 = !c.decoupled && c.weightDecay != 0;
  for (int64_t i = begin; i < end; ++i) {
    float g = loadGrad(b, i);
    if (c.unscale)
      g *= c.invScale;
    if (c.clip)
      g *= c.clipCoef;
    float p = b.param[i];
    if (c.decoupled)
      p *= c.decay;
    else if (l2)
      g += p * c.weightDecay;
    float m = b.expAvg[i] * c.beta1 + g * c.oneMinusBeta1;
    float v = b.expAvgSq[i] * c.beta2 + g * g * c.oneMinusBeta2;
    b.expAvg[i] = m;
    b.expAvgSq[i] = v;
    float denom = std::sqrt(v) / c.bias2Sqrt + c.eps;
    p = p - c.stepSize * (m / denom);
    b.param[i] = p;
    if (b.copy)
      b.copy[i] =
          b.copyFormat == FloatFormat::F16 ? floatToHalf(p) : floatToBf16(p);
  }
}

AdamSpanFn adamSpanFor(simd::IsaKind isa) {
  switch (isa) {
  case simd::IsaKind::Avx512:
    return adamSpanAvx512;
  case simd::IsaKind::Avx2:
    return adamSpanAvx2;
  case simd::IsaKind::Scalar:
    break;
  }
  return adamReferenceSpan;
}

static simd::IsaKind chooseIsa() {
  simd::IsaKind isa = simd::bestIsa();
  if (const char *asked = std::getenv("ZINC_CPU_ADAM_ISA")) {
    for (simd::IsaKind k :
         {simd::IsaKind::Scalar, simd::IsaKind::Avx2, simd::IsaKind::Avx512})
      if (std::strcmp(asked, simd::isaName(k)) == 0 && k < isa)
        isa = k;
  }
  return isa;
}

simd::IsaKind cpuAdamIsa() {
  static const simd::IsaKind isa = chooseIsa();
  return isa;
}

void cpuAdam(const AdamConstants &c, const AdamBuffers &b, int64_t n,
             simd::IsaKind isa) {
  AdamSpanFn span = adamSpanFor(isa);
  int64_t tiles = (n + kAdamTile - 1) / kAdamTile;
  cpu::parallelFor(tiles, tiles > 4, [&](int64_t t) {
    int64_t begin = t * kAdamTile;
    span(c, b, begin, begin + kAdamTile < n ? begin + kAdamTile : n);
  });
}

} // namespace zinc::optim
