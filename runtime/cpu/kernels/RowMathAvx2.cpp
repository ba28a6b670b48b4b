//===- RowMathAvx2.cpp - RowMath's loops in Avx2 ---------------------------===//
//
// Compiled for Avx2 by target attributes, not by -m flags, so the rest of
// the build stays baseline x86-64; rowMath() picks it only on CPUs that run
// it.
//
//===----------------------------------------------------------------------===//
#include "zinc/runtime/cpu/RowMath.h"

#if ZINC_SIMD_X86
#define ZINC_SIMD_MATH_FN __attribute__((target(ZINC_SIMD_AVX2_TARGET)))
// GCC 12 reads _mm512_undefined_ps() (the unused pass-through of masked
// builtins) as an uninitialised variable.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include "RowMathBody.h"

namespace zinc::cpu {
const RowMath &rowMathAvx2() {
  static const RowMath m =
      rowmath::makeRowMath<simd::Avx2>(simd::IsaKind::Avx2);
  return m;
}
} // namespace zinc::cpu
#endif
