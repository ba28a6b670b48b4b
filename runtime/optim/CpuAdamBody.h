//===- CpuAdamBody.h - The Adam/AdamW loop, written once over simd ISAs ---===//
//
// Included by one translation unit per ISA, which first defines
// ZINC_CPU_ADAM_FN as that ISA's target attribute with floating-point
// contraction off (an attribute on each function, as GCC does not apply a
// `#pragma GCC target` to template instantiations): the loop is
// adamReferenceSpan()'s, operation for operation, so a fused multiply-add
// the compiler formed on its own would change the rounding (and make the
// ISAs disagree). The tail (fewer elements than a vector) is the reference.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_OPTIM_CPUADAMBODY_H
#define ZINC_RUNTIME_OPTIM_CPUADAMBODY_H

#include "zinc/runtime/optim/CpuAdam.h"

#ifndef ZINC_CPU_ADAM_FN
#error                                                                         \
    "define ZINC_CPU_ADAM_FN (the target attribute) before including CpuAdamBody.h"
#endif

namespace zinc::optim::detail {

template <class V, FloatFormat G>
ZINC_CPU_ADAM_FN static inline typename V::F loadGrad(const void *g,
                                                      int64_t i) {
  if constexpr (G == FloatFormat::F32)
    return V::loadu(static_cast<const float *>(g) + i);
  else if constexpr (G == FloatFormat::F16)
    return V::loadHalf(static_cast<const uint16_t *>(g) + i);
  else
    return V::loadBf16(static_cast<const uint16_t *>(g) + i);
}

/// C is the copy's format; F32 stands for "no copy".
template <class V, FloatFormat C>
ZINC_CPU_ADAM_FN static inline void storeCopy(uint16_t *copy, int64_t i,
                                              typename V::F p) {
  if constexpr (C == FloatFormat::F16)
    V::storeHalf(copy + i, p);
  else if constexpr (C == FloatFormat::BF16)
    V::storeBf16(copy + i, p);
}

template <class V, FloatFormat G, FloatFormat C>
ZINC_CPU_ADAM_FN static void adamSpanT(const AdamConstants &c,
                                       const AdamBuffers &b, int64_t begin,
                                       int64_t end) {
  using F = typename V::F;
  float *param = b.param, *expAvg = b.expAvg, *expAvgSq = b.expAvgSq;
  const F decay = V::set1(c.decay), wd = V::set1(c.weightDecay);
  const F b1 = V::set1(c.beta1), b2 = V::set1(c.beta2);
  const F oneMinusB1 = V::set1(c.oneMinusBeta1),
          oneMinusB2 = V::set1(c.oneMinusBeta2);
  const F stepSize = V::set1(c.stepSize), bias2Sqrt = V::set1(c.bias2Sqrt);
  const F eps = V::set1(c.eps), inv = V::set1(c.invScale),
          clipCoef = V::set1(c.clipCoef);
  const bool decoupled = c.decoupled, l2 = !c.decoupled && c.weightDecay != 0;
  const bool unscale = c.unscale, clip = c.clip;
  int64_t i = begin;
  for (; i + V::width <= end; i += V::width) {
    F g = loadGrad<V, G>(b.grad, i);
    if (unscale)
      g = V::mul(g, inv);
    if (clip)
      g = V::mul(g, clipCoef);
    F p = V::loadu(param + i);
    if (decoupled)
      p = V::mul(p, decay);
    else if (l2)
      g = V::add(g, V::mul(p, wd));
    F m = V::add(V::mul(V::loadu(expAvg + i), b1), V::mul(g, oneMinusB1));
    F v = V::add(V::mul(V::loadu(expAvgSq + i), b2),
                 V::mul(V::mul(g, g), oneMinusB2));
    V::storeu(expAvg + i, m);
    V::storeu(expAvgSq + i, v);
    F denom = V::add(V::div(V::sqrt(v), bias2Sqrt), eps);
    p = V::sub(p, V::mul(stepSize, V::div(m, denom)));
    V::storeu(param + i, p);
    storeCopy<V, C>(b.copy, i, p);
  }
  if (i < end)
    adamReferenceSpan(c, b, i, end);
}

template <class V, FloatFormat G>
ZINC_CPU_ADAM_FN static void adamSpanG(const AdamConstants &c,
                                       const AdamBuffers &b, int64_t begin,
                                       int64_t end) {
  switch (b.copy ? b.copyFormat : FloatFormat::F32) {
  case FloatFormat::F32:
    return adamSpanT<V, G, FloatFormat::F32>(c, b, begin, end);
  case FloatFormat::F16:
    return adamSpanT<V, G, FloatFormat::F16>(c, b, begin, end);
  case FloatFormat::BF16:
    return adamSpanT<V, G, FloatFormat::BF16>(c, b, begin, end);
  }
}

/// adamSpanT for the formats of `b`.
template <class V>
ZINC_CPU_ADAM_FN static void adamSpan(const AdamConstants &c,
                                      const AdamBuffers &b, int64_t begin,
                                      int64_t end) {
  switch (b.gradFormat) {
  case FloatFormat::F32:
    return adamSpanG<V, FloatFormat::F32>(c, b, begin, end);
  case FloatFormat::F16:
    return adamSpanG<V, FloatFormat::F16>(c, b, begin, end);
  case FloatFormat::BF16:
    return adamSpanG<V, FloatFormat::BF16>(c, b, begin, end);
  }
}

} // namespace zinc::optim::detail

#endif
