//===- Convert.h - One element conversion rule for Cast and mixed-type ops
//-===//
//
// Cast, Pow with an integer base and a float exponent, and any other kernel
// that changes an element's type go through convertValue(), so that every
// conversion rounds and truncates the same way.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_CPU_KERNELS_CONVERT_H
#define ZINC_RUNTIME_CPU_KERNELS_CONVERT_H

#include "KernelUtil.h"
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

namespace zinc::cpu {

/// Float to integer: truncates toward zero. ONNX leaves NaN and out-of-range
/// values undefined; they become 0 and the nearest bound so that the C++
/// conversion is never undefined behaviour.
template <typename I, typename F> inline I truncateToInt(F v) {
  static_assert(std::is_integral_v<I> && std::is_floating_point_v<F>);
  if (v != v)
    return 0;
  // F(max) rounds up to a power of two, so `>=` catches every value the
  // cast could not represent.
  if (v >= static_cast<F>(std::numeric_limits<I>::max()))
    return std::numeric_limits<I>::max();
  if (v <= static_cast<F>(std::numeric_limits<I>::lowest()))
    return std::numeric_limits<I>::lowest();
  return static_cast<I>(v);
}

/// Rounds a double to float with round-to-odd. Rounding that float once more
/// to a 16-bit float (at most 11 significant bits, far fewer than float's 24)
/// then gives the correctly rounded result, which double -> float -> half
/// with round-to-nearest twice does not.
inline float roundToOddFloat(double d) {
  float f = static_cast<float>(d);
  if (static_cast<double>(f) != d && std::isfinite(f)) {
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    if ((bits & 1u) == 0)
      f = std::nextafter(f, d > f ? std::numeric_limits<float>::infinity()
                                  : -std::numeric_limits<float>::infinity());
  }
  return f;
}

template <typename T> constexpr bool isHalfStorage() {
  return std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;
}

/// Converts one element between storage types: to bool is `!= 0` (NaN is
/// true), to a 16-bit float rounds to nearest even, float to integer
/// truncates toward zero, integer to integer wraps like numpy's astype.
template <typename To, typename From> inline To convertValue(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, bool>) {
    return load(v) != 0;
  } else if constexpr (isHalfStorage<To>()) {
    if constexpr (isHalfStorage<From>() || std::is_same_v<From, float>)
      return store<To>(load(v));
    else
      return store<To>(roundToOddFloat(static_cast<double>(load(v))));
  } else if constexpr (std::is_integral_v<To>) {
    auto c = load(v);
    if constexpr (std::is_floating_point_v<decltype(c)>)
      return truncateToInt<To>(c);
    else
      return static_cast<To>(c);
  } else {
    return static_cast<To>(load(v));
  }
}

} // namespace zinc::cpu

#endif
