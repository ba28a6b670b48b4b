//===- SimdMath.h - exp, erf and tanh over the SIMD layer's vectors -------===//
//
// Templates over an ISA struct of Simd.h (Scalar, Avx2, Avx512), for
// translation units that instantiate them under that ISA's target, as
// CpuAdamBody.h does: the includer defines ZINC_SIMD_MATH_FN (its target
// attribute) first. The scalar instantiation runs the same polynomials, so
// a row's tail rounds as its body does.
//
// Every template is static: each translation unit keeps its own copy,
// compiled for its own ISA (an inline one would be merged across them).
//
// The approximations were fitted for zinc (near-minimax, over the ranges
// named below) and are checked against the C library in
// test/unit/kernels/RowMathTest.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_OPTIM_SIMDMATH_H
#define ZINC_RUNTIME_OPTIM_SIMDMATH_H

#include "zinc/runtime/optim/Simd.h"

#ifndef ZINC_SIMD_MATH_FN
#error "define ZINC_SIMD_MATH_FN (the target attribute) before SimdMath.h"
#endif

namespace zinc::simd {

/// exp(x): x = n ln2 + r with |r| <= ln2/2 (ln2 split in two so n ln2 is
/// exact), e^r by a degree-6 polynomial, times 2^n. Below -87.3 (where
/// 2^n leaves the normal range) the result is 0, -inf included; above
/// 88.38 it is +inf; NaN propagates.
template <class V> static ZINC_SIMD_MATH_FN inline typename V::F vexp(typename V::F x) {
  using F = typename V::F;
  const F lo = V::set1(-87.33654f), hi = V::set1(88.37626f);
  F xc = V::min(hi, V::max(lo, x));
  F n = V::roundInt(V::mul(xc, V::set1(1.44269504088896341f)));
  F r = V::fma(n, V::set1(-0.693359375f), xc);
  r = V::fma(n, V::set1(2.12194440e-4f), r);
  F p = V::set1(1.9875691500e-4f);
  p = V::fma(p, r, V::set1(1.3981999507e-3f));
  p = V::fma(p, r, V::set1(8.3334519073e-3f));
  p = V::fma(p, r, V::set1(4.1665795894e-2f));
  p = V::fma(p, r, V::set1(1.6666665459e-1f));
  p = V::fma(p, r, V::set1(5.0000001201e-1f));
  F r2 = V::mul(r, r);
  F e = V::add(V::fma(p, r2, r), V::set1(1.0f));
  F y = V::mul(e, V::pow2i(n));
  y = V::ltSelect(hi, x, V::set1(__builtin_inff()), y);
  return V::ltSelect(x, lo, V::set1(0.0f), y);
}

/// erf(x): for |x| < 1, x P(x^2) (degree 6); for 1 <= |x| < 4,
/// 1 - exp(-x^2) R(1/|x|) (R degree 9, erfc(x) e^{x^2} as a function of
/// 1/x); from 4 on, +-1 (erf(4) rounds to 1 in float).
template <class V> static ZINC_SIMD_MATH_FN inline typename V::F verf(typename V::F x) {
  using F = typename V::F;
  F a = V::min(V::set1(4.0f), V::abs(x));
  F t = V::mul(a, a);
  F p = V::set1(7.889120406275542e-05f);
  p = V::fma(p, t, V::set1(-0.0008020841541712865f));
  p = V::fma(p, t, V::set1(0.0051895353687605f));
  p = V::fma(p, t, V::set1(-0.026854444607129997f));
  p = V::fma(p, t, V::set1(0.11283600176613288f));
  p = V::fma(p, t, V::set1(-0.3761262713599609f));
  p = V::fma(p, t, V::set1(1.1283791659137556f));
  F small = V::mul(a, p);
  F u = V::div(V::set1(1.0f), V::max(V::set1(1.0f), a));
  F q = V::set1(0.027019431680837945f);
  q = V::fma(q, u, V::set1(-0.15907693940167048f));
  q = V::fma(q, u, V::set1(0.3881843194405784f));
  q = V::fma(q, u, V::set1(-0.467850770711783f));
  q = V::fma(q, u, V::set1(0.17860903318104734f));
  q = V::fma(q, u, V::set1(0.2638650850933639f));
  q = V::fma(q, u, V::set1(-0.3880070791396892f));
  q = V::fma(q, u, V::set1(0.02328363238974894f));
  q = V::fma(q, u, V::set1(0.5614164207250436f));
  q = V::fma(q, u, V::set1(0.00014044657048459675f));
  F large = V::sub(V::set1(1.0f), V::mul(vexp<V>(V::sub(V::set1(0.0f), t)), q));
  F r = V::ltSelect(a, V::set1(1.0f), small, large);
  // NaN: |x| < 1 is false, and large is NaN through a.
  return V::copySign(r, x);
}

/// tanh(x): for |x| < 0.625, x Q(x^2) (degree 5); beyond,
/// 1 - 2 / (exp(2|x|) + 1), which saturates to 1 as exp overflows.
template <class V> static ZINC_SIMD_MATH_FN inline typename V::F vtanh(typename V::F x) {
  using F = typename V::F;
  F a = V::min(V::set1(40.0f), V::abs(x));
  F t = V::mul(a, a);
  F p = V::set1(-0.005672422674311476f);
  p = V::fma(p, t, V::set1(0.020603148057680973f));
  p = V::fma(p, t, V::set1(-0.05372523192213795f));
  p = V::fma(p, t, V::set1(0.13331185772280538f));
  p = V::fma(p, t, V::set1(-0.3333326338062727f));
  p = V::fma(p, t, V::set1(0.9999999962994588f));
  F small = V::mul(a, p);
  F e = vexp<V>(V::add(a, a));
  F large = V::sub(V::set1(1.0f),
                   V::div(V::set1(2.0f), V::add(e, V::set1(1.0f))));
  F r = V::ltSelect(a, V::set1(0.625f), small, large);
  return V::copySign(r, x);
}

} // namespace zinc::simd

#endif
