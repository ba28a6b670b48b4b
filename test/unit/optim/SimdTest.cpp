//===- SimdTest.cpp - zinc/runtime/optim/Simd.h against scalar float ------===//
//
// Each vector ISA the CPU has (the others skip) against plain float
// arithmetic and zinc/support/Float16.h: arithmetic lane for lane, aligned
// and unaligned loads and stores, every IEEE half, and floats chosen to hit
// each rounding case of the f16 and bf16 conversions (ties, subnormals,
// overflow, infinities, NaN).
//
//===----------------------------------------------------------------------===//
#include "zinc/runtime/optim/Simd.h"
#include <cmath>
#include <cstring>
#include <gtest/gtest.h>
#include <initializer_list>
#include <random>
#include <vector>

using namespace zinc;
using namespace zinc::simd;

// GCC 12 reads _mm512_undefined_ps() (the unused pass-through of the
// masked builtins behind sqrt and cvtps_ph) as an uninitialised variable.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace {

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float fromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/// Per-ISA array loops. They carry the ISA's target attribute, so the
/// vector members inline into them; the tails are left to the caller
/// (sizes here are multiples of 16).
#define ZINC_TEST_ISA_LOOPS(V, TARGET)                                         \
  __attribute__((target(TARGET))) void toHalf##V(const float *in,              \
                                                 uint16_t *out, size_t n) {    \
    for (size_t i = 0; i < n; i += V::width)                                   \
      V::storeHalf(out + i, V::loadu(in + i));                                 \
  }                                                                            \
  __attribute__((target(TARGET))) void toBf16##V(const float *in,              \
                                                 uint16_t *out, size_t n) {    \
    for (size_t i = 0; i < n; i += V::width)                                   \
      V::storeBf16(out + i, V::loadu(in + i));                                 \
  }                                                                            \
  __attribute__((target(TARGET))) void fromHalf##V(const uint16_t *in,         \
                                                   float *out, size_t n) {     \
    for (size_t i = 0; i < n; i += V::width)                                   \
      V::storeu(out + i, V::loadHalf(in + i));                                 \
  }                                                                            \
  __attribute__((target(TARGET))) void fromBf16##V(const uint16_t *in,         \
                                                   float *out, size_t n) {     \
    for (size_t i = 0; i < n; i += V::width)                                   \
      V::storeu(out + i, V::loadBf16(in + i));                                 \
  }                                                                            \
  /* out[k] = op_k(a, b, c) for the ops in Ops order, a/b/c/out aligned. */    \
  __attribute__((target(TARGET))) void ops##V(const float *a, const float *b,  \
                                              const float *c,                  \
                                              float *const *out, size_t n) {   \
    for (size_t i = 0; i < n; i += V::width) {                                 \
      auto x = V::load(a + i), y = V::load(b + i), z = V::load(c + i);         \
      V::store(out[0] + i, V::add(x, y));                                      \
      V::store(out[1] + i, V::sub(x, y));                                      \
      V::store(out[2] + i, V::mul(x, y));                                      \
      V::store(out[3] + i, V::div(x, y));                                      \
      V::store(out[4] + i, V::sqrt(z));                                        \
      V::store(out[5] + i, V::fma(x, y, z));                                   \
      V::storeu(out[6] + i, V::set1(a[0]));                                    \
    }                                                                          \
  }

ZINC_TEST_ISA_LOOPS(Avx512, ZINC_SIMD_AVX512_TARGET)
ZINC_TEST_ISA_LOOPS(Avx2, ZINC_SIMD_AVX2_TARGET)

struct IsaLoops {
  IsaKind isa;
  void (*toHalf)(const float *, uint16_t *, size_t);
  void (*toBf16)(const float *, uint16_t *, size_t);
  void (*fromHalf)(const uint16_t *, float *, size_t);
  void (*fromBf16)(const uint16_t *, float *, size_t);
  void (*ops)(const float *, const float *, const float *, float *const *,
              size_t);
};

const IsaLoops kIsas[] = {
    {IsaKind::Avx512, toHalfAvx512, toBf16Avx512, fromHalfAvx512,
     fromBf16Avx512, opsAvx512},
    {IsaKind::Avx2, toHalfAvx2, toBf16Avx2, fromHalfAvx2, fromBf16Avx2,
     opsAvx2},
};

/// Floats around every rounding boundary of both 16-bit formats: for each
/// exponent from the smallest subnormal to beyond the largest finite value,
/// mantissas with every pattern of the bits just below the 10th and 7th
/// mantissa bit (ties, above and below), both signs; plus zeros,
/// infinities, quiet and signalling NaNs, and random bit patterns.
std::vector<float> conversionInputs() {
  std::vector<uint32_t> bits = {
      0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u,
      0xffc00001u, 0x7f800001u, 0x7fbfffffu, 0x477fefffu, 0x477ff000u,
      0x477fffffu, 0x47800000u, 0x33000000u, 0x33000001u, 0x387fffffu,
      0x38800000u, 0x7f7fffffu, 0x7f7f8000u, 0x00000001u, 0x007fffffu};
  // Bit 13 is the last kept mantissa bit of a half and bit 12 its rounding
  // bit; bits 16 and 15 the same for bf16; bit 0 a sticky bit; 0x7fffff
  // carries into the exponent when it rounds up.
  const uint32_t mantissaBits[] = {1u << 13, 1u << 12, 1u,
                                   1u << 16, 1u << 15, 1u << 22};
  for (uint32_t exp = 0; exp < 256; ++exp) {
    for (uint32_t low = 0; low < 64; ++low) {
      uint32_t mant = 0;
      for (int k = 0; k < 6; ++k)
        if (low >> k & 1u)
          mant |= mantissaBits[k];
      bits.push_back((exp << 23) | mant);
      bits.push_back((exp << 23) | mant | 0x80000000u);
    }
    for (uint32_t mant : {0x7fffffu, 0x7fe000u, 0x7ff000u, 0x7f8000u, 0x7fffu})
      bits.push_back((exp << 23) | mant);
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 100000; ++i)
    bits.push_back(static_cast<uint32_t>(rng()));
  while (bits.size() % 16)
    bits.push_back(0x3f800000u);
  std::vector<float> out;
  for (uint32_t u : bits)
    out.push_back(fromBits(u));
  return out;
}

class SimdTest : public ::testing::TestWithParam<IsaLoops> {
protected:
  void SetUp() override {
    if (!simdSupported(GetParam().isa))
      GTEST_SKIP() << "this CPU has no " << isaName(GetParam().isa);
  }
};

TEST_P(SimdTest, FloatToHalfAndBf16RoundLikeFloat16H) {
  std::vector<float> in = conversionInputs();
  std::vector<uint16_t> half(in.size()), bf16(in.size());
  GetParam().toHalf(in.data(), half.data(), in.size());
  GetParam().toBf16(in.data(), bf16.data(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    ASSERT_EQ(half[i], floatToHalf(in[i]))
        << std::hex << "float bits 0x" << bitsOf(in[i]);
    ASSERT_EQ(bf16[i], floatToBf16(in[i]))
        << std::hex << "float bits 0x" << bitsOf(in[i]);
  }
}

TEST_P(SimdTest, EveryHalfAndBf16WidensExactly) {
  std::vector<uint16_t> in(65536);
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = static_cast<uint16_t>(i);
  std::vector<float> half(in.size()), bf16(in.size());
  GetParam().fromHalf(in.data(), half.data(), in.size());
  GetParam().fromBf16(in.data(), bf16.data(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    float want = halfToFloat(in[i]);
    // The hardware quiets a signalling NaN; halfToFloat keeps its payload
    // as is. Either is a NaN with the same sign.
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(half[i])) << std::hex << "half 0x" << i;
      ASSERT_EQ(bitsOf(half[i]) >> 31, bitsOf(want) >> 31);
    } else {
      ASSERT_EQ(bitsOf(half[i]), bitsOf(want)) << std::hex << "half 0x" << i;
    }
    ASSERT_EQ(bitsOf(bf16[i]), bitsOf(bf16ToFloat(in[i])))
        << std::hex << "bf16 0x" << i;
  }
}

TEST_P(SimdTest, ArithmeticIsLaneWiseIeee) {
  const size_t n = 4096;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-100.0f, 100.0f);
  struct alignas(64) Block {
    float x[n];
  };
  std::vector<Block> blocks(10);
  float *a = blocks[0].x, *b = blocks[1].x, *c = blocks[2].x;
  for (size_t i = 0; i < n; ++i) {
    a[i] = dist(rng);
    b[i] = dist(rng);
    c[i] = std::fabs(dist(rng)) * (i % 7 ? 1.0f : 1e-30f);
  }
  b[3] = 0.0f;  // division by zero gives inf
  c[5] = -1.0f; // sqrt of a negative gives NaN
  float *out[7];
  for (int k = 0; k < 7; ++k)
    out[k] = blocks[3 + k].x;
  GetParam().ops(a, b, c, out, n);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(bitsOf(out[0][i]), bitsOf(a[i] + b[i])) << i;
    ASSERT_EQ(bitsOf(out[1][i]), bitsOf(a[i] - b[i])) << i;
    ASSERT_EQ(bitsOf(out[2][i]), bitsOf(a[i] * b[i])) << i;
    ASSERT_EQ(bitsOf(out[3][i]), bitsOf(a[i] / b[i])) << i;
    if (c[i] < 0) {
      ASSERT_TRUE(std::isnan(out[4][i])) << i;
    } else {
      ASSERT_EQ(bitsOf(out[4][i]), bitsOf(std::sqrt(c[i]))) << i;
    }
    ASSERT_EQ(bitsOf(out[5][i]), bitsOf(std::fma(a[i], b[i], c[i]))) << i;
    ASSERT_EQ(bitsOf(out[6][i]), bitsOf(a[0])) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, SimdTest, ::testing::ValuesIn(kIsas),
                         [](const ::testing::TestParamInfo<IsaLoops> &info) {
                           return std::string(isaName(info.param.isa));
                         });

TEST(SimdIsa, BestIsaIsSupportedAndScalarAlwaysIs) {
  EXPECT_TRUE(simdSupported(IsaKind::Scalar));
  EXPECT_TRUE(simdSupported(bestIsa()));
  // The widest ISA supported is the best one.
  for (IsaKind k : {IsaKind::Avx2, IsaKind::Avx512}) {
    if (simdSupported(k)) {
      EXPECT_GE(static_cast<int>(bestIsa()), static_cast<int>(k));
    }
  }
}

} // namespace
