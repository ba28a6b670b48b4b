//===- CpuAdamAvx2.cpp - The Adam/AdamW kernel in AVX2 --------------------===//
//
// Compiled for AVX2 by target attributes, not by -m flags, so the rest of
// the build stays baseline x86-64; cpuAdamIsa() picks it only on CPUs that
// have AVX2, FMA and F16C.
//
//===----------------------------------------------------------------------===//
#include "zinc/runtime/optim/CpuAdam.h"

#if ZINC_SIMD_X86
#if defined(__clang__)
#define ZINC_CPU_ADAM_FN __attribute__((target(ZINC_SIMD_AVX2_TARGET)))
#pragma clang fp contract(off)
#else
// clang-format off
#define ZINC_CPU_ADAM_FN \
  __attribute__((target(ZINC_SIMD_AVX2_TARGET), optimize("fp-contract=off")))
// clang-format on
#endif
#include "CpuAdamBody.h"

ZINC_CPU_ADAM_FN void zinc::optim::adamSpanAvx2(const AdamConstants &c,
                                                const AdamBuffers &b,
                                                int64_t begin, int64_t end) {
  detail::adamSpan<simd::Avx2>(c, b, begin, end);
}
#else
void zinc::optim::adamSpanAvx2(const AdamConstants &c, const AdamBuffers &b,
                               int64_t begin, int64_t end) {
  adamReferenceSpan(c, b, begin, end);
}
#endif
