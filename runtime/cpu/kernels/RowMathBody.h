//===- RowMathBody.h - RowMath's loops, written once over the ISAs --------===//
//
// Included by one translation unit per ISA (RowMathAvx512.cpp, ...), which
// defines ZINC_SIMD_MATH_FN as its target attribute first. Every loop runs
// whole vectors and then the tail with the Scalar ISA, the same arithmetic
// one lane wide.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_CPU_KERNELS_ROWMATHBODY_H
#define ZINC_RUNTIME_CPU_KERNELS_ROWMATHBODY_H

#include "zinc/runtime/cpu/RowMath.h"
#include "zinc/runtime/optim/SimdMath.h"
#include <limits>

namespace zinc::cpu::rowmath {

using simd::Scalar;

/// The body, with W an ISA and j an index, over [0, n): whole vectors of V
/// (W = V), then the tail one lane at a time (W = Scalar).
#define ZINC_ROW_LOOP(n, ...)                                                 \
  {                                                                            \
    int64_t j = 0;                                                             \
    {                                                                          \
      using W = V;                                                             \
      for (; j + 2 * W::width <= (n);) {                                       \
        __VA_ARGS__ j += W::width;                                             \
        __VA_ARGS__ j += W::width;                                             \
      }                                                                        \
      for (; j + W::width <= (n); j += W::width)                               \
        __VA_ARGS__                                                            \
    }                                                                          \
    {                                                                          \
      using W = Scalar;                                                        \
      for (; j < (n); ++j)                                                     \
        __VA_ARGS__                                                            \
    }                                                                          \
  }

template <class V> static ZINC_SIMD_MATH_FN float rowMax(const float *x, int64_t n) {
  typename V::F mv = V::set1(-std::numeric_limits<float>::infinity());
  float ms = -std::numeric_limits<float>::infinity();
  int64_t j = 0;
  for (; j + V::width <= n; j += V::width)
    mv = V::max(mv, V::loadu(x + j));
  for (; j < n; ++j)
    ms = Scalar::max(ms, x[j]);
  return Scalar::max(V::reduceMax(mv), ms);
}

/// Four accumulators: a quarter of the rounding error of one, and four
/// independent chains of additions.
template <class V>
static ZINC_SIMD_MATH_FN float rowSumExp(const float *x, int64_t n,
                                         float shift) {
  using F = typename V::F;
  F s = V::set1(shift);
  F a0 = V::set1(0.0f), a1 = a0, a2 = a0, a3 = a0;
  int64_t j = 0;
  for (; j + 4 * V::width <= n; j += 4 * V::width) {
    a0 = V::add(a0, simd::vexp<V>(V::sub(V::loadu(x + j), s)));
    a1 = V::add(a1, simd::vexp<V>(V::sub(V::loadu(x + j + V::width), s)));
    a2 = V::add(a2, simd::vexp<V>(V::sub(V::loadu(x + j + 2 * V::width), s)));
    a3 = V::add(a3, simd::vexp<V>(V::sub(V::loadu(x + j + 3 * V::width), s)));
  }
  for (; j + V::width <= n; j += V::width)
    a0 = V::add(a0, simd::vexp<V>(V::sub(V::loadu(x + j), s)));
  float tail = 0;
  for (; j < n; ++j)
    tail += simd::vexp<Scalar>(x[j] - shift);
  return V::reduceAdd(V::add(V::add(a0, a1), V::add(a2, a3))) + tail;
}

template <class V>
static ZINC_SIMD_MATH_FN void rowExpScale(const float *x, float *y, int64_t n,
                                   float shift, float scale) {
  ZINC_ROW_LOOP(n, {
    auto e = simd::vexp<W>(W::sub(W::loadu(x + j), W::set1(shift)));
    W::storeu(y + j, W::mul(e, W::set1(scale)));
  })
}

template <class V>
static ZINC_SIMD_MATH_FN float rowDot(const float *a, const float *b,
                                      int64_t n) {
  using F = typename V::F;
  F a0 = V::set1(0.0f), a1 = a0, a2 = a0, a3 = a0;
  int64_t j = 0;
  for (; j + 4 * V::width <= n; j += 4 * V::width) {
    a0 = V::fma(V::loadu(a + j), V::loadu(b + j), a0);
    a1 = V::fma(V::loadu(a + j + V::width), V::loadu(b + j + V::width), a1);
    a2 = V::fma(V::loadu(a + j + 2 * V::width),
                V::loadu(b + j + 2 * V::width), a2);
    a3 = V::fma(V::loadu(a + j + 3 * V::width),
                V::loadu(b + j + 3 * V::width), a3);
  }
  for (; j + V::width <= n; j += V::width)
    a0 = V::fma(V::loadu(a + j), V::loadu(b + j), a0);
  float tail = 0;
  for (; j < n; ++j)
    tail += a[j] * b[j];
  return V::reduceAdd(V::add(V::add(a0, a1), V::add(a2, a3))) + tail;
}

template <class V>
static ZINC_SIMD_MATH_FN void rowSoftmaxGrad(const float *y, const float *dy,
                                      float *dx, int64_t n, float dot) {
  ZINC_ROW_LOOP(n, {
    W::storeu(dx + j, W::mul(W::loadu(y + j),
                             W::sub(W::loadu(dy + j), W::set1(dot))));
  })
}

/// Phi(x) = (1 + erf(x / sqrt 2)) / 2 and, for the tanh form,
/// (1 + tanh(k (x + c x^3))) / 2 with k = sqrt(2/pi), c = 0.044715.
template <class W>
static ZINC_SIMD_MATH_FN inline typename W::F geluGate(typename W::F x,
                                                GeluForm form) {
  if (form == GeluForm::Erf)
    return W::mul(W::set1(0.5f),
                  W::add(W::set1(1.0f),
                         simd::verf<W>(W::mul(x, W::set1(0.70710678118654752f)))));
  typename W::F x3 = W::mul(W::mul(x, x), x);
  typename W::F u = W::mul(W::set1(0.7978845608028654f),
                           W::fma(W::set1(0.044715f), x3, x));
  return W::mul(W::set1(0.5f), W::add(W::set1(1.0f), simd::vtanh<W>(u)));
}

template <class V>
static ZINC_SIMD_MATH_FN void rowGelu(const float *x, float *y, int64_t n,
                               GeluForm form) {
  ZINC_ROW_LOOP(n, {
    auto v = W::loadu(x + j);
    W::storeu(y + j, W::mul(v, geluGate<W>(v, form)));
  })
}

/// d/dx x Phi(x) = Phi(x) + x phi(x) for the erf form; for the tanh form
/// (1 + t)/2 + x/2 (1 - t^2) k (1 + 3 c x^2), t = tanh(k (x + c x^3)).
template <class V>
static ZINC_SIMD_MATH_FN void rowGeluGrad(const float *x, const float *dy, float *dx,
                                   int64_t n, GeluForm form) {
  if (form == GeluForm::Erf) {
    ZINC_ROW_LOOP(n, {
      auto v = W::loadu(x + j);
      auto cdf = geluGate<W>(v, form);
      auto pdf = W::mul(W::set1(0.3989422804014327f),
                        simd::vexp<W>(W::mul(W::set1(-0.5f), W::mul(v, v))));
      W::storeu(dx + j, W::mul(W::loadu(dy + j), W::fma(v, pdf, cdf)));
    })
    return;
  }
  ZINC_ROW_LOOP(n, {
    auto v = W::loadu(x + j);
    auto v2 = W::mul(v, v);
    auto u = W::mul(W::set1(0.7978845608028654f),
                    W::fma(W::set1(0.044715f), W::mul(v2, v), v));
    auto t = simd::vtanh<W>(u);
    auto half = W::set1(0.5f), one = W::set1(1.0f);
    auto du = W::mul(W::set1(0.7978845608028654f),
                     W::fma(W::set1(3 * 0.044715f), v2, one));
    auto d = W::fma(W::mul(W::mul(half, v), W::sub(one, W::mul(t, t))), du,
                    W::mul(half, W::add(one, t)));
    W::storeu(dx + j, W::mul(W::loadu(dy + j), d));
  })
}

template <class V>
static ZINC_SIMD_MATH_FN void rowErf(const float *x, float *y, int64_t n) {
  ZINC_ROW_LOOP(n, { W::storeu(y + j, simd::verf<W>(W::loadu(x + j))); })
}

template <class V>
static ZINC_SIMD_MATH_FN void rowErfGrad(const float *x, const float *dy, float *dx,
                                  int64_t n) {
  ZINC_ROW_LOOP(n, {
    auto v = W::loadu(x + j);
    auto e = simd::vexp<W>(W::sub(W::set1(0.0f), W::mul(v, v)));
    W::storeu(dx + j, W::mul(W::loadu(dy + j),
                             W::mul(W::set1(1.1283791670955126f), e)));
  })
}

template <class V>
static ZINC_SIMD_MATH_FN void rowExp(const float *x, float *y, int64_t n) {
  ZINC_ROW_LOOP(n, { W::storeu(y + j, simd::vexp<W>(W::loadu(x + j))); })
}

template <class V>
static ZINC_SIMD_MATH_FN void rowTanh(const float *x, float *y, int64_t n) {
  ZINC_ROW_LOOP(n, { W::storeu(y + j, simd::vtanh<W>(W::loadu(x + j))); })
}

template <class V>
static ZINC_SIMD_MATH_FN void rowLayerNormGrad(const float *x, const float *dy,
                                               const float *gamma, float *dx,
                                               int64_t n, float mean,
                                               float rstd) {
  using F = typename V::F;
  F m = V::set1(mean), r = V::set1(rstd);
  F sg0 = V::set1(0.0f), sg1 = sg0, sx0 = sg0, sx1 = sg0;
  int64_t j = 0;
  for (; j + 2 * V::width <= n; j += 2 * V::width) {
    F g0 = V::mul(V::loadu(dy + j), V::loadu(gamma + j));
    F g1 = V::mul(V::loadu(dy + j + V::width), V::loadu(gamma + j + V::width));
    F h0 = V::mul(V::sub(V::loadu(x + j), m), r);
    F h1 = V::mul(V::sub(V::loadu(x + j + V::width), m), r);
    sg0 = V::add(sg0, g0);
    sg1 = V::add(sg1, g1);
    sx0 = V::fma(g0, h0, sx0);
    sx1 = V::fma(g1, h1, sx1);
  }
  float sumG = V::reduceAdd(V::add(sg0, sg1)), sumGX = V::reduceAdd(V::add(sx0, sx1));
  for (; j < n; ++j) {
    float g = dy[j] * gamma[j], h = (x[j] - mean) * rstd;
    sumG += g;
    sumGX += g * h;
  }
  float meanG = n ? sumG / float(n) : 0.0f, meanGX = n ? sumGX / float(n) : 0.0f;
  ZINC_ROW_LOOP(n, {
    auto g = W::mul(W::loadu(dy + j), W::loadu(gamma + j));
    auto h = W::mul(W::sub(W::loadu(x + j), W::set1(mean)), W::set1(rstd));
    auto v = W::sub(W::sub(g, W::set1(meanG)), W::mul(h, W::set1(meanGX)));
    W::storeu(dx + j, W::mul(W::set1(rstd), v));
  })
}

/// Double accumulators, vectorised by the compiler for the TU's ISA (Simd.h
/// has no double vectors).
template <class V>
static ZINC_SIMD_MATH_FN void rowLayerNormParamGrad(const float *x,
                                                    const float *dy, int64_t n,
                                                    float mean, float rstd,
                                                    double *accScale,
                                                    double *accBias) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j)
    accScale[j] += double(dy[j]) * double((x[j] - mean) * rstd);
  if (accBias) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j)
      accBias[j] += double(dy[j]);
  }
}

#undef ZINC_ROW_LOOP

/// The table of V's loops.
template <class V> static RowMath makeRowMath(simd::IsaKind isa) {
  RowMath m;
  m.isa = isa;
  m.max = rowMax<V>;
  m.sumExp = rowSumExp<V>;
  m.expScale = rowExpScale<V>;
  m.dot = rowDot<V>;
  m.softmaxGrad = rowSoftmaxGrad<V>;
  m.gelu = rowGelu<V>;
  m.geluGrad = rowGeluGrad<V>;
  m.erf = rowErf<V>;
  m.erfGrad = rowErfGrad<V>;
  m.layerNormGrad = rowLayerNormGrad<V>;
  m.layerNormParamGrad = rowLayerNormParamGrad<V>;
  m.exp = rowExp<V>;
  m.tanh = rowTanh<V>;
  return m;
}

} // namespace zinc::cpu::rowmath

#endif
