//===- RowMathAvx512.cpp - RowMath's loops in Avx512 ---------------------------===//
//
// Compiled for Avx512 by target attributes, not by -m flags, so the rest of
// the build stays baseline x86-64; rowMath() picks it only on CPUs that run
// it.
//
//===----------------------------------------------------------------------===//
#include "zinc/runtime/cpu/RowMath.h"

#if ZINC_SIMD_X86
#define ZINC_SIMD_MATH_FN __attribute__((target(ZINC_SIMD_AVX512_TARGET)))
// GCC 12 reads _mm512_undefined_ps() (the unused pass-through of masked
// builtins) as an uninitialised variable.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include "RowMathBody.h"

namespace zinc::cpu {
const RowMath &rowMathAvx512() {
  static const RowMath m =
      rowmath::makeRowMath<simd::Avx512>(simd::IsaKind::Avx512);
  return m;
}
} // namespace zinc::cpu
#endif
