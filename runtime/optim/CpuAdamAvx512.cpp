//===- CpuAdamAvx512.cpp - The Adam/AdamW kernel in AVX-512 ---------------===//
//
// Compiled for AVX-512 by target attributes, not by -m flags, so the rest of
// the build stays baseline x86-64; cpuAdamIsa() picks it only on CPUs that
// have AVX-512F.
//
//===----------------------------------------------------------------------===//
#include "zinc/runtime/optim/CpuAdam.h"

#if ZINC_SIMD_X86
#if defined(__clang__)
#define ZINC_CPU_ADAM_FN __attribute__((target(ZINC_SIMD_AVX512_TARGET)))
#pragma clang fp contract(off)
#else
// clang-format off
#define ZINC_CPU_ADAM_FN \
  __attribute__((target(ZINC_SIMD_AVX512_TARGET), optimize("fp-contract=off")))
// clang-format on
#endif
// GCC 12 reads _mm512_undefined_ps() (the unused pass-through of the
// masked builtins behind sqrt and cvtps_ph) as an uninitialised variable.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "CpuAdamBody.h"

ZINC_CPU_ADAM_FN void zinc::optim::adamSpanAvx512(const AdamConstants &c,
                                                  const AdamBuffers &b,
                                                  int64_t begin, int64_t end) {
  detail::adamSpan<simd::Avx512>(c, b, begin, end);
}
#else
void zinc::optim::adamSpanAvx512(const AdamConstants &c, const AdamBuffers &b,
                                 int64_t begin, int64_t end) {
  adamReferenceSpan(c, b, begin, end);
}
#endif
