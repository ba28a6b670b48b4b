//===- ElementwiseMath.h - Per-element math of the elementwise cuda kernels
//===//
//
// Every formula the elementwise kernels apply to one element, written once
// for the GPU and the host (ZINC_HD), on compute values: float for f32 and
// the 16-bit floats, double for f64, the integer itself otherwise. Each one
// mirrors, operation for operation, the functor of the cpu kernel for the
// same op (cpu/kernels/Elementwise.cpp, grad/ElementwiseGrad.cpp,
// Convert.h), so that the host tests can hold them to the cpu's results
// and the kernels differ from the cpu only by the libm they call.
//
// Plain C++ on the host: no CUDA header, so the tests need no nvcc.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_CUDA_KERNELS_ELEMENTWISEMATH_H
#define ZINC_RUNTIME_CUDA_KERNELS_ELEMENTWISEMATH_H

#include "HostDevice.h"
#include <cstdint>
#include <math.h>
#include <type_traits>
#ifndef __CUDA_ARCH__
#include <cstring>
#endif

// A namespace of its own: other kernel families' ZINC_HD helpers live in
// zinc::cuda too, and two inline functions of one name there would be an
// ODR violation the linker resolves silently.
namespace zinc::cuda::elementwise {

//===----------------------------------------------------------------------===//
// libm, by compute type. The global names are declared for both sides: the
// host's glibc (what std::exp(float) calls on the cpu) and CUDA's device
// math library.
//===----------------------------------------------------------------------===//

ZINC_HD float expOf(float v) { return ::expf(v); }
ZINC_HD double expOf(double v) { return ::exp(v); }
ZINC_HD float logOf(float v) { return ::logf(v); }
ZINC_HD double logOf(double v) { return ::log(v); }
ZINC_HD float sqrtOf(float v) { return ::sqrtf(v); }
ZINC_HD double sqrtOf(double v) { return ::sqrt(v); }
ZINC_HD float erfOf(float v) { return ::erff(v); }
ZINC_HD double erfOf(double v) { return ::erf(v); }
ZINC_HD float tanhOf(float v) { return ::tanhf(v); }
ZINC_HD double tanhOf(double v) { return ::tanh(v); }
ZINC_HD float powOf(float b, float e) { return ::powf(b, e); }
ZINC_HD double powOf(double b, double e) { return ::pow(b, e); }

/// M_SQRT1_2, sqrt(2/pi), 1/sqrt(2 pi) and 2/sqrt(pi), as the cpu spells
/// them (math.h's macros need _GNU_SOURCE, so they are literals here).
constexpr double kSqrtHalf = 0.70710678118654752440;
constexpr double kSqrtTwoOverPi = 0.7978845608028654;
constexpr double kInvSqrtTwoPi = 0.3989422804014327;
constexpr double kTwoOverSqrtPi = 1.12837916709551257390;
constexpr double kGeluCubic = 0.044715;

//===----------------------------------------------------------------------===//
// Arithmetic. Integers wrap like numpy: computed in an unsigned type at least
// as wide as unsigned int, so neither signed overflow nor the promotion of
// narrow types to int is undefined behaviour.
//===----------------------------------------------------------------------===//

template <typename C>
using WrapT = std::conditional_t<(sizeof(C) < sizeof(unsigned)), unsigned,
                                 std::make_unsigned_t<C>>;

template <typename C> ZINC_HD C addValues(C a, C b) {
  if constexpr (std::is_integral_v<C>)
    return static_cast<C>(WrapT<C>(a) + WrapT<C>(b));
  else
    return a + b;
}
template <typename C> ZINC_HD C subValues(C a, C b) {
  if constexpr (std::is_integral_v<C>)
    return static_cast<C>(WrapT<C>(a) - WrapT<C>(b));
  else
    return a - b;
}
/// Max and Min as the cpu's: NaN wins, ties take a.
template <typename C> ZINC_HD C maxValues(C a, C b) {
  if (a != a)
    return a;
  if (b != b)
    return b;
  return a >= b ? a : b;
}
template <typename C> ZINC_HD C minValues(C a, C b) {
  if (a != a)
    return a;
  if (b != b)
    return b;
  return a <= b ? a : b;
}
/// Mod as the cpu's: integers take the divisor's sign (ONNX fmod=0, Python's
/// %) and floats C's fmod (fmod=1, the only float form ONNX allows); x % 0
/// and x % -1 are 0 (the cpu refuses the first before it starts; a kernel
/// cannot, see divValues).
template <typename C> ZINC_HD C modValues(C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    if (b == C(0))
      return C(0);
    if constexpr (std::is_signed_v<C>)
      if (b == C(-1))
        return C(0);
    C r = static_cast<C>(a % b);
    if constexpr (std::is_signed_v<C>)
      if (r != 0 && ((r < 0) != (b < 0)))
        r = static_cast<C>(r + b);
    return r;
  } else {
    return fmod(a, b);
  }
}
/// fmod=1 on integers: the remainder takes the dividend's sign (C's %).
template <typename C> ZINC_HD C fmodValues(C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    if (b == C(0))
      return C(0);
    if constexpr (std::is_signed_v<C>)
      if (b == C(-1))
        return C(0);
    return static_cast<C>(a % b);
  } else {
    return fmod(a, b);
  }
}
template <typename C> ZINC_HD C mulValues(C a, C b) {
  if constexpr (std::is_integral_v<C>)
    return static_cast<C>(WrapT<C>(a) * WrapT<C>(b));
  else
    return a * b;
}
/// Integer division truncates toward zero and min / -1 wraps, as on the
/// cpu. The cpu refuses a zero divisor before it starts; a kernel cannot
/// see its divisors without waiting for the stream, so x / 0 is 0 here
/// (defined, if not an error) rather than whatever the hardware gives.
template <typename C> ZINC_HD C divValues(C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    if (b == C(0))
      return C(0);
    if constexpr (std::is_signed_v<C>)
      if (b == C(-1))
        return subValues(C(0), a);
    return static_cast<C>(a / b);
  } else {
    return a / b;
  }
}
template <typename C> ZINC_HD C negValue(C v) {
  if constexpr (std::is_integral_v<C>)
    return static_cast<C>(WrapT<C>(0) - static_cast<WrapT<C>>(v));
  else
    return -v;
}

/// base^exp for integers by squaring, wrapping on overflow. A negative
/// exponent gives the real result truncated toward zero (only bases 1 and
/// -1 are nonzero).
template <typename T, typename E> ZINC_HD T intPow(T base, E exp) {
  if constexpr (std::is_signed_v<E>) {
    if (exp < 0) {
      if (base == 1)
        return 1;
      if constexpr (std::is_signed_v<T>)
        if (base == -1)
          return (exp & 1) ? T(-1) : T(1);
      return 0;
    }
  }
  WrapT<T> result = 1, b = static_cast<WrapT<T>>(base);
  for (uint64_t n = static_cast<uint64_t>(exp); n; n >>= 1, b *= b)
    if (n & 1)
      result *= b;
  return static_cast<T>(result);
}

//===----------------------------------------------------------------------===//
// Activations, on float or double
//===----------------------------------------------------------------------===//

/// `v < 0 ? 0 : v` rather than max(): NaN passes through, as on the cpu.
template <typename C> ZINC_HD C relu(C v) {
  if constexpr (std::is_unsigned_v<C>)
    return v;
  else
    return v < C(0) ? C(0) : v;
}
template <typename C> ZINC_HD C leakyRelu(C v, C alpha) {
  return v < C(0) ? alpha * v : v;
}
/// exp(-v) overflows to inf for very negative v, giving exactly 0.
template <typename C> ZINC_HD C sigmoid(C v) {
  return C(1) / (C(1) + expOf(-v));
}
template <typename C> ZINC_HD C reciprocal(C v) { return C(1) / v; }
/// x / (1 + exp(-x)), as PyTorch's silu.
template <typename C> ZINC_HD C silu(C v) { return v / (C(1) + expOf(-v)); }
/// x min(max(x + 3, 0), 6) / 6, as PyTorch's hardswish.
template <typename C> ZINC_HD C hardSwish(C v) {
  C t = v + C(3);
  t = t < C(0) ? C(0) : (t > C(6) ? C(6) : t);
  return v * t / C(6);
}
/// Gelu, approximate="none".
template <typename C> ZINC_HD C geluErf(C v) {
  return C(0.5) * v * (C(1) + erfOf(v * C(kSqrtHalf)));
}
/// Gelu, approximate="tanh".
template <typename C> ZINC_HD C geluTanh(C v) {
  const C k = C(kSqrtTwoOverPi);
  return C(0.5) * v * (C(1) + tanhOf(k * (v + C(kGeluCubic) * v * v * v)));
}

//===----------------------------------------------------------------------===//
// Gradients: dx from the forward input x (or output y) and dy
//===----------------------------------------------------------------------===//

/// PyTorch's convention: no gradient at x == 0.
template <typename C> ZINC_HD C reluGrad(C x, C g) {
  return x > C(0) ? g : C(0);
}
/// x <= 0 takes the slope, as in PyTorch's leaky_relu_backward.
template <typename C> ZINC_HD C leakyReluGrad(C x, C g, C alpha) {
  return x > C(0) ? g : alpha * g;
}
/// d/dx x Phi(x) = Phi(x) + x phi(x).
template <typename C> ZINC_HD C geluErfGrad(C x, C g) {
  const C invSqrt2Pi = C(kInvSqrtTwoPi);
  C cdf = C(0.5) * (C(1) + erfOf(x * C(kSqrtHalf)));
  C pdf = invSqrt2Pi * expOf(C(-0.5) * x * x);
  return g * (cdf + x * pdf);
}
/// y = x/2 (1 + tanh(u)), u = k (x + c x^3):
/// dy/dx = (1 + t)/2 + x/2 (1 - t^2) k (1 + 3 c x^2).
template <typename C> ZINC_HD C geluTanhGrad(C x, C g) {
  const C k = C(kSqrtTwoOverPi), c = C(kGeluCubic);
  C t = tanhOf(k * (x + c * x * x * x));
  C d = C(0.5) * (C(1) + t) +
        C(0.5) * x * (C(1) - t * t) * k * (C(1) + C(3) * c * x * x);
  return g * d;
}
/// dy s (1 + x (1 - s)), s = sigmoid(x): PyTorch's silu_backward.
template <typename C> ZINC_HD C siluGrad(C x, C g) {
  C s = C(1) / (C(1) + expOf(-x));
  return g * (s * (C(1) + x * (C(1) - s)));
}
/// 0 below -3, dy (x / 3 + 1/2) up to 3, dy above: hardswish_backward.
template <typename C> ZINC_HD C hardSwishGrad(C x, C g) {
  if (x < C(-3))
    return C(0);
  if (x <= C(3))
    return g * (x / C(3) + C(0.5));
  return g;
}
/// From the output y = sigmoid(x).
template <typename C> ZINC_HD C sigmoidGrad(C y, C g) {
  return g * y * (C(1) - y);
}
/// From the output y = tanh(x).
template <typename C> ZINC_HD C tanhGrad(C y, C g) {
  return g * (C(1) - y * y);
}
template <typename C> ZINC_HD C erfGrad(C x, C g) {
  return g * C(kTwoOverSqrtPi) * expOf(-x * x);
}

//===----------------------------------------------------------------------===//
// Conversions (Cast), between types other than the 16-bit floats: those
// are loaded as float, and stored from the float roundToOddFloat gives.
//===----------------------------------------------------------------------===//

/// The range of an integer type, without <limits>: numeric_limits' members
/// are constexpr host functions, which device code may not call.
template <typename I> struct IntRange {
  using U = std::make_unsigned_t<I>;
  static constexpr I max = std::is_signed_v<I> ? static_cast<I>(U(~U(0)) >> 1)
                                               : static_cast<I>(~U(0));
  static constexpr I lowest =
      std::is_signed_v<I> ? static_cast<I>(-max - 1) : I(0);
};

/// Float to integer truncates toward zero; NaN becomes 0 and out-of-range
/// values the nearest bound, as the cpu's truncateToInt.
template <typename I, typename F> ZINC_HD I truncateToInt(F v) {
  static_assert(std::is_integral_v<I> && std::is_floating_point_v<F>);
  if (v != v)
    return 0;
  // F(max) rounds up to a power of two, so `>=` catches every value the
  // conversion could not represent.
  if (v >= static_cast<F>(IntRange<I>::max))
    return IntRange<I>::max;
  if (v <= static_cast<F>(IntRange<I>::lowest))
    return IntRange<I>::lowest;
  return static_cast<I>(v);
}

ZINC_HD uint32_t bitsOf(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
#endif
}
ZINC_HD float floatOfBits(uint32_t bits) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(bits);
#else
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
#endif
}

/// Rounds a double to float with round-to-odd, so that rounding the result
/// once more to a 16-bit float is correctly rounded (as the cpu does for
/// f64 and integers cast to f16 or bf16). Round to nearest first; when that
/// was inexact and landed on an even significand, the neighbour on d's side
/// (one step in magnitude, by the bit pattern) is the odd one.
ZINC_HD float roundToOddFloat(double d) {
  float f = static_cast<float>(d);
  uint32_t bits = bitsOf(f);
  bool finite = (bits & 0x7F800000u) != 0x7F800000u;
  if (static_cast<double>(f) != d && finite && (bits & 1u) == 0) {
    bool awayFromZero = (d < 0 ? -d : d) > (f < 0 ? -f : f);
    f = floatOfBits(awayFromZero ? bits + 1 : bits - 1);
  }
  return f;
}

/// The float a 16-bit float is rounded from when converting from `From`
/// (never a 16-bit float itself): float as it is, anything wider through
/// round-to-odd.
template <typename From> ZINC_HD float halfSource(From v) {
  if constexpr (std::is_same_v<From, float>)
    return v;
  else
    return roundToOddFloat(static_cast<double>(v));
}

/// One element between float, double, bool and the integer types: to bool
/// is `!= 0` (NaN is true), float to integer truncates, integer to integer
/// wraps like numpy's astype.
template <typename To, typename From> ZINC_HD To convertScalar(From v) {
  if constexpr (std::is_same_v<To, From>)
    return v;
  else if constexpr (std::is_same_v<To, bool>)
    return v != From(0);
  else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>)
    return truncateToInt<To>(v);
  else
    return static_cast<To>(v);
}

} // namespace zinc::cuda::elementwise

#endif
