//===- Simd.h - One vector-of-floats interface over AVX-512, AVX2, scalar -===//
//
// The CPU optimizer kernels are written once, as templates over one of the
// ISA structs below (Avx512: 16 lanes, Avx2: 8 lanes, Scalar: 1 lane), and
// instantiated in one translation unit per ISA. One build runs on any
// x86-64: the AVX-512 and AVX2 members carry their own target attributes,
// so nothing here needs -mavx* on the command line, and the caller picks an
// ISA at run time (cpuAdamIsa() in CpuAdam.h). A translation unit that
// instantiates a kernel over Avx512/Avx2 puts it under the matching
// `#pragma GCC target` (ZINC_SIMD_AVX512_TARGET / ZINC_SIMD_AVX2_TARGET), so
// the members inline into it.
//
// Every member is one IEEE operation (no fused multiply-add unless fma() is
// asked for, no approximate reciprocal or square root), so a kernel that
// keeps the order of a scalar loop gives its bits exactly. The 16-bit
// conversions round to nearest even and treat NaN as zinc/support/Float16.h
// does (hardware F16C for IEEE half, integer arithmetic for bfloat16).
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_OPTIM_SIMD_H
#define ZINC_RUNTIME_OPTIM_SIMD_H

#include "zinc/support/Float16.h"
#include <cmath>
#include <cstdint>
#include <cstring>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define ZINC_SIMD_X86 1
#else
#define ZINC_SIMD_X86 0
#endif

/// The target strings of the two vector ISAs (for `#pragma GCC target` and
/// __attribute__((target))). Check them at run time with simdSupported().
#define ZINC_SIMD_AVX512_TARGET "avx512f,avx2,fma,f16c"
#define ZINC_SIMD_AVX2_TARGET "avx2,fma,f16c"

namespace zinc::simd {

/// One lane, plain C++: the fallback on machines without AVX2 and the shape
/// the vector structs follow.
struct Scalar {
  using F = float;
  static constexpr int width = 1;
  static constexpr const char *name = "scalar";
  static F load(const float *p) { return *p; }
  static F loadu(const float *p) { return *p; }
  static void store(float *p, F x) { *p = x; }
  static void storeu(float *p, F x) { *p = x; }
  static F set1(float x) { return x; }
  static F add(F a, F b) { return a + b; }
  static F sub(F a, F b) { return a - b; }
  static F mul(F a, F b) { return a * b; }
  static F div(F a, F b) { return a / b; }
  static F sqrt(F a) { return std::sqrt(a); }
  /// a * b + c with one rounding.
  static F fma(F a, F b, F c) { return std::fma(a, b, c); }
  /// max and min as the x86 instructions: the second operand when either
  /// is NaN (so max(c, x) passes a NaN x through).
  static F max(F a, F b) { return a > b ? a : b; }
  static F min(F a, F b) { return a < b ? a : b; }
  static F abs(F a) { return std::fabs(a); }
  /// Rounded to the nearest integer, ties to even.
  static F roundInt(F a) { return std::nearbyint(a); }
  /// 2^n for an integer-valued n in [-126, 127].
  static F pow2i(F n) {
    uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
    float r;
    std::memcpy(&r, &bits, sizeof r);
    return r;
  }
  /// a < b ? x : y, lane by lane (false for NaN).
  static F ltSelect(F a, F b, F x, F y) { return a < b ? x : y; }
  /// |mag| with the sign of `sign`.
  static F copySign(F mag, F sign) { return std::copysign(mag, sign); }
  static float reduceAdd(F a) { return a; }
  static float reduceMax(F a) { return a; }
  static F loadHalf(const uint16_t *p) { return halfToFloat(*p); }
  static void storeHalf(uint16_t *p, F x) { *p = floatToHalf(x); }
  static F loadBf16(const uint16_t *p) { return bf16ToFloat(*p); }
  static void storeBf16(uint16_t *p, F x) { *p = floatToBf16(x); }
};

#if ZINC_SIMD_X86
#define ZINC_SIMD_AVX512_FN                                                    \
  static inline __attribute__((target(ZINC_SIMD_AVX512_TARGET), always_inline))
#define ZINC_SIMD_AVX2_FN                                                      \
  static inline __attribute__((target(ZINC_SIMD_AVX2_TARGET), always_inline))

/// 16 lanes of AVX-512F (with F16C's and AVX2's 256-bit halves where a
/// 16-bit vector is 256 bits wide).
struct Avx512 {
  using F = __m512;
  static constexpr int width = 16;
  static constexpr const char *name = "avx512";
  /// `p` 64-byte aligned.
  ZINC_SIMD_AVX512_FN F load(const float *p) { return _mm512_load_ps(p); }
  ZINC_SIMD_AVX512_FN F loadu(const float *p) { return _mm512_loadu_ps(p); }
  ZINC_SIMD_AVX512_FN void store(float *p, F x) { _mm512_store_ps(p, x); }
  ZINC_SIMD_AVX512_FN void storeu(float *p, F x) { _mm512_storeu_ps(p, x); }
  ZINC_SIMD_AVX512_FN F set1(float x) { return _mm512_set1_ps(x); }
  ZINC_SIMD_AVX512_FN F add(F a, F b) { return _mm512_add_ps(a, b); }
  ZINC_SIMD_AVX512_FN F sub(F a, F b) { return _mm512_sub_ps(a, b); }
  ZINC_SIMD_AVX512_FN F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  ZINC_SIMD_AVX512_FN F div(F a, F b) { return _mm512_div_ps(a, b); }
  ZINC_SIMD_AVX512_FN F sqrt(F a) { return _mm512_sqrt_ps(a); }
  ZINC_SIMD_AVX512_FN F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  ZINC_SIMD_AVX512_FN F max(F a, F b) { return _mm512_max_ps(a, b); }
  ZINC_SIMD_AVX512_FN F min(F a, F b) { return _mm512_min_ps(a, b); }
  ZINC_SIMD_AVX512_FN F abs(F a) {
    return _mm512_castsi512_ps(_mm512_and_si512(
        _mm512_castps_si512(a), _mm512_set1_epi32(0x7fffffff)));
  }
  ZINC_SIMD_AVX512_FN F roundInt(F a) {
    return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  ZINC_SIMD_AVX512_FN F pow2i(F n) {
    __m512i e = _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127));
    return _mm512_castsi512_ps(_mm512_slli_epi32(e, 23));
  }
  ZINC_SIMD_AVX512_FN F ltSelect(F a, F b, F x, F y) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_LT_OQ), y, x);
  }
  ZINC_SIMD_AVX512_FN F copySign(F mag, F sign) {
    __m512i m = _mm512_and_si512(_mm512_castps_si512(mag),
                                 _mm512_set1_epi32(0x7fffffff));
    __m512i sg = _mm512_and_si512(_mm512_castps_si512(sign),
                                  _mm512_set1_epi32(int(0x80000000u)));
    return _mm512_castsi512_ps(_mm512_or_si512(m, sg));
  }
  ZINC_SIMD_AVX512_FN float reduceAdd(F a) { return _mm512_reduce_add_ps(a); }
  ZINC_SIMD_AVX512_FN float reduceMax(F a) { return _mm512_reduce_max_ps(a); }
  ZINC_SIMD_AVX512_FN F loadHalf(const uint16_t *p) {
    return _mm512_cvtph_ps(
        _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)));
  }
  ZINC_SIMD_AVX512_FN void storeHalf(uint16_t *p, F x) {
    _mm256_storeu_si256(
        reinterpret_cast<__m256i *>(p),
        _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  ZINC_SIMD_AVX512_FN F loadBf16(const uint16_t *p) {
    __m512i w = _mm512_cvtepu16_epi32(
        _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
  }
  /// floatToBf16 lane by lane: add 0x7fff plus the lowest kept bit, keep the
  /// high half; NaN keeps its high half with the quiet bit set.
  ZINC_SIMD_AVX512_FN void storeBf16(uint16_t *p, F x) {
    __m512i u = _mm512_castps_si512(x);
    __m512i lsb =
        _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i rounded = _mm512_srli_epi32(
        _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))),
        16);
    __m512i quiet =
        _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
    __mmask16 nan = _mm512_cmpgt_epu32_mask(
        _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
        _mm512_set1_epi32(0x7f800000));
    __m512i bits = _mm512_mask_blend_epi32(nan, rounded, quiet);
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(p),
                        _mm512_cvtepi32_epi16(bits));
  }
};

/// 8 lanes of AVX2 with F16C.
struct Avx2 {
  using F = __m256;
  static constexpr int width = 8;
  static constexpr const char *name = "avx2";
  /// `p` 32-byte aligned.
  ZINC_SIMD_AVX2_FN F load(const float *p) { return _mm256_load_ps(p); }
  ZINC_SIMD_AVX2_FN F loadu(const float *p) { return _mm256_loadu_ps(p); }
  ZINC_SIMD_AVX2_FN void store(float *p, F x) { _mm256_store_ps(p, x); }
  ZINC_SIMD_AVX2_FN void storeu(float *p, F x) { _mm256_storeu_ps(p, x); }
  ZINC_SIMD_AVX2_FN F set1(float x) { return _mm256_set1_ps(x); }
  ZINC_SIMD_AVX2_FN F add(F a, F b) { return _mm256_add_ps(a, b); }
  ZINC_SIMD_AVX2_FN F sub(F a, F b) { return _mm256_sub_ps(a, b); }
  ZINC_SIMD_AVX2_FN F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  ZINC_SIMD_AVX2_FN F div(F a, F b) { return _mm256_div_ps(a, b); }
  ZINC_SIMD_AVX2_FN F sqrt(F a) { return _mm256_sqrt_ps(a); }
  ZINC_SIMD_AVX2_FN F fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  ZINC_SIMD_AVX2_FN F max(F a, F b) { return _mm256_max_ps(a, b); }
  ZINC_SIMD_AVX2_FN F min(F a, F b) { return _mm256_min_ps(a, b); }
  ZINC_SIMD_AVX2_FN F abs(F a) {
    return _mm256_and_ps(a, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)));
  }
  ZINC_SIMD_AVX2_FN F roundInt(F a) {
    return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  ZINC_SIMD_AVX2_FN F pow2i(F n) {
    __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
    return _mm256_castsi256_ps(_mm256_slli_epi32(e, 23));
  }
  ZINC_SIMD_AVX2_FN F ltSelect(F a, F b, F x, F y) {
    return _mm256_blendv_ps(y, x, _mm256_cmp_ps(a, b, _CMP_LT_OQ));
  }
  ZINC_SIMD_AVX2_FN F copySign(F mag, F sign) {
    __m256 signBit = _mm256_castsi256_ps(_mm256_set1_epi32(int(0x80000000u)));
    return _mm256_or_ps(_mm256_andnot_ps(signBit, mag),
                        _mm256_and_ps(signBit, sign));
  }
  ZINC_SIMD_AVX2_FN float reduceAdd(F a) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  ZINC_SIMD_AVX2_FN float reduceMax(F a) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  ZINC_SIMD_AVX2_FN F loadHalf(const uint16_t *p) {
    return _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
  }
  ZINC_SIMD_AVX2_FN void storeHalf(uint16_t *p, F x) {
    _mm_storeu_si128(
        reinterpret_cast<__m128i *>(p),
        _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  ZINC_SIMD_AVX2_FN F loadBf16(const uint16_t *p) {
    __m256i w = _mm256_cvtepu16_epi32(
        _mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
  }
  /// As Avx512::storeBf16; the unsigned NaN test is a signed compare of the
  /// magnitudes (both below 2^31).
  ZINC_SIMD_AVX2_FN void storeBf16(uint16_t *p, F x) {
    __m256i u = _mm256_castps_si256(x);
    __m256i lsb =
        _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i rounded = _mm256_srli_epi32(
        _mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))),
        16);
    __m256i quiet =
        _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    __m256i nan =
        _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                           _mm256_set1_epi32(0x7f800000));
    __m256i bits = _mm256_blendv_epi8(rounded, quiet, nan);
    // Every lane is below 2^16, so the saturating pack is exact.
    __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(bits),
                                      _mm256_extracti128_si256(bits, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i *>(p), packed);
  }
};
#undef ZINC_SIMD_AVX512_FN
#undef ZINC_SIMD_AVX2_FN
#endif // ZINC_SIMD_X86

/// The instruction sets, widest last.
enum class IsaKind { Scalar, Avx2, Avx512 };

#if ZINC_SIMD_X86
/// CPUID.1:ECX.F16C (clang's __builtin_cpu_supports does not know "f16c").
inline bool cpuHasF16c() {
  unsigned eax, ebx, ecx, edx;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C);
}
#endif

/// Whether this CPU (and OS) runs `isa`'s instructions.
inline bool simdSupported(IsaKind isa) {
#if ZINC_SIMD_X86
  switch (isa) {
  case IsaKind::Scalar:
    return true;
  case IsaKind::Avx2:
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           cpuHasF16c();
  case IsaKind::Avx512:
    return __builtin_cpu_supports("avx512f") && simdSupported(IsaKind::Avx2);
  }
  return false;
#else
  return isa == IsaKind::Scalar;
#endif
}

/// The widest ISA this CPU supports.
inline IsaKind bestIsa() {
  if (simdSupported(IsaKind::Avx512))
    return IsaKind::Avx512;
  if (simdSupported(IsaKind::Avx2))
    return IsaKind::Avx2;
  return IsaKind::Scalar;
}

inline const char *isaName(IsaKind isa) {
  switch (isa) {
  case IsaKind::Scalar:
    return "scalar";
  case IsaKind::Avx2:
    return "avx2";
  case IsaKind::Avx512:
    return "avx512";
  }
  return "?";
}

} // namespace zinc::simd

#endif
