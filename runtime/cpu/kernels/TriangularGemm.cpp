//===- TriangularGemm.cpp - GEMMs that skip a triangle of zeros -----------===//
//
// C in blocks of kNC columns and K in blocks of kKC; each block of B is
// packed into kNR-column panels (k-major) and multiplied by one register
// tile of kMR x kNR at a time. A is read where it lies: attention's A is
// the [T,T] matrix, used by few columns, and packing it cost twice the
// arithmetic it fed (measured at T 256, head width 64). A tile's terms
// are summed only over the k range that its triangle leaves nonzero,
// which is where the work goes: the tiles above a LowerY diagonal are not
// computed at all, and a tile beside a zero triangle of A or B sums over
// part of K. A block of B that no tile needs is not packed.
//
// The tile on AVX2 keeps 6 x 16 sums in 12 registers (the shape BLIS uses
// on this core); without AVX2 a portable loop does the same arithmetic.
//
//===----------------------------------------------------------------------===//
#include "TriangularGemm.h"
#include "zinc/runtime/optim/Simd.h"
#include <algorithm>
#include <cstring>
#if ZINC_SIMD_X86
#include <immintrin.h>
#endif

namespace zinc::cpu {
namespace {

constexpr int64_t kMR = 6, kNR = 16;
// B's packed block lives on the stack (64 KiB) and stays in L2; a tile's
// six rows of A and one panel of B stay in L1.
constexpr int64_t kKC = 128, kNC = 128;
static_assert(kNC % kNR == 0, "blocks of whole panels");

/// A logical matrix: element (i, j) at p[i * rows + j * cols].
struct Strided {
  const float *p;
  int64_t rows, cols;
};

/// Columns [j0, j0 + nc) of op(B) over k [k0, k0 + kc) as kNR-column
/// panels: element (p, c) of panel q at out[q * kNR * kc + p * kNR + c];
/// columns past n are zeros. Only terms [p0, p1) are packed: no tile of
/// the block reads the others.
void packB(Strided b, int64_t n, int64_t j0, int64_t nc, int64_t k0,
           int64_t kc, int64_t p0, int64_t p1, float *out) {
  for (int64_t q = 0; q < nc; q += kNR, out += kNR * kc) {
    int64_t width = std::min(kNR, n - j0 - q);
    const float *src = b.p + k0 * b.rows + (j0 + q) * b.cols;
    if (b.cols == 1) { // rows of B are contiguous
      for (int64_t p = p0; p < p1; ++p) {
        std::copy(src + p * b.rows, src + p * b.rows + width, out + p * kNR);
        std::fill(out + p * kNR + width, out + (p + 1) * kNR, 0.0f);
      }
      continue;
    }
    for (int64_t c = 0; c < kNR; ++c)
      for (int64_t p = p0; p < p1; ++p)
        out[p * kNR + c] = c < width ? src[p * b.rows + c * b.cols] : 0.0f;
  }
}

/// The k range [lo, hi) whose terms can be nonzero for C's rows [r0, r1)
/// and columns [c0, c1) (empty when none can).
void neededK(Triangle t, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
             int64_t k, int64_t &lo, int64_t &hi) {
  lo = 0;
  hi = k;
  switch (t) {
  case Triangle::None:
    break;
  case Triangle::LowerY: // wholly above the diagonal: not wanted
    if (c0 > r1 - 1)
      hi = 0;
    break;
  case Triangle::LowerOpA: // op(A)[i][p] = 0 for p > i
    hi = r1;
    break;
  case Triangle::UpperOpA: // op(A)[i][p] = 0 for p < i
    lo = r0;
    break;
  case Triangle::LowerOpB: // op(B)[p][j] = 0 for j > p
    lo = c0;
    break;
  case Triangle::UpperOpB: // op(B)[p][j] = 0 for j < p
    hi = c1;
    break;
  }
  hi = std::min(hi, k);
}

/// Where a tile's sums go: C's element (r, j) of the tile at
/// c[r * ldc + j], for r < mr and j < nr; the sums times alpha overwrite
/// it (the first of its k blocks, with beta 0) or add to it.
struct TileOut {
  float *c;
  int64_t ldc, mr, nr;
  bool overwrite;
};

/// Adds (or stores) alpha * sum into the tile.
void storeTile(const TileOut &o, float alpha, const float (&sum)[kMR][kNR]) {
  for (int64_t r = 0; r < o.mr; ++r)
    for (int64_t j = 0; j < o.nr; ++j) {
      float &y = o.c[r * o.ldc + j];
      y = o.overwrite ? alpha * sum[r][j] : y + alpha * sum[r][j];
    }
}

/// One tile: alpha * (A's kMR rows x a B panel) over kc terms, A's element
/// (r, p) at a[r * ars + p * acs]. The AVX2 tile reads all kMR rows of A
/// (the caller pads a last, shorter tile).
using TileFn = void (*)(int64_t kc, const float *a, int64_t ars, int64_t acs,
                        const float *b, float alpha, const TileOut &out);

void tilePortable(int64_t kc, const float *a, int64_t ars, int64_t acs,
                  const float *b, float alpha, const TileOut &out) {
  float sum[kMR][kNR] = {};
  for (int64_t p = 0; p < kc; ++p, b += kNR)
    for (int64_t r = 0; r < out.mr; ++r) {
      float x = a[r * ars + p * acs];
      for (int64_t j = 0; j < kNR; ++j)
        sum[r][j] += x * b[j];
    }
  storeTile(out, alpha, sum);
}

#if ZINC_SIMD_X86
/// Row r's term p of A, for the two layouts attention has: rows
/// contiguous along k (acs 1), or the six rows side by side (ars 1).
template <bool RowsContiguous>
__attribute__((target(ZINC_SIMD_AVX2_TARGET), always_inline)) inline __m256
broadcastA(const float *a, int64_t ars, int64_t acs, int64_t r, int64_t p) {
  return _mm256_broadcast_ss(RowsContiguous ? a + r * ars + p
                                            : a + p * acs + r);
}

template <bool RowsContiguous>
__attribute__((target(ZINC_SIMD_AVX2_TARGET))) void
tileAvx2(int64_t kc, const float *a, int64_t ars, int64_t acs, const float *b,
         float alpha, const TileOut &out) {
  __m256 s00 = _mm256_setzero_ps(), s01 = s00, s10 = s00, s11 = s00,
         s20 = s00, s21 = s00, s30 = s00, s31 = s00, s40 = s00, s41 = s00,
         s50 = s00, s51 = s00;
  for (int64_t p = 0; p < kc; ++p, b += kNR) {
    __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
    __m256 x = broadcastA<RowsContiguous>(a, ars, acs, 0, p);
    s00 = _mm256_fmadd_ps(x, b0, s00);
    s01 = _mm256_fmadd_ps(x, b1, s01);
    x = broadcastA<RowsContiguous>(a, ars, acs, 1, p);
    s10 = _mm256_fmadd_ps(x, b0, s10);
    s11 = _mm256_fmadd_ps(x, b1, s11);
    x = broadcastA<RowsContiguous>(a, ars, acs, 2, p);
    s20 = _mm256_fmadd_ps(x, b0, s20);
    s21 = _mm256_fmadd_ps(x, b1, s21);
    x = broadcastA<RowsContiguous>(a, ars, acs, 3, p);
    s30 = _mm256_fmadd_ps(x, b0, s30);
    s31 = _mm256_fmadd_ps(x, b1, s31);
    x = broadcastA<RowsContiguous>(a, ars, acs, 4, p);
    s40 = _mm256_fmadd_ps(x, b0, s40);
    s41 = _mm256_fmadd_ps(x, b1, s41);
    x = broadcastA<RowsContiguous>(a, ars, acs, 5, p);
    s50 = _mm256_fmadd_ps(x, b0, s50);
    s51 = _mm256_fmadd_ps(x, b1, s51);
  }
  __m256 sums[kMR][2] = {{s00, s01}, {s10, s11}, {s20, s21},
                         {s30, s31}, {s40, s41}, {s50, s51}};
  __m256 al = _mm256_set1_ps(alpha);
  if (out.mr == kMR && out.nr == kNR) {
    for (int64_t r = 0; r < kMR; ++r)
      for (int64_t h = 0; h < 2; ++h) {
        float *row = out.c + r * out.ldc + 8 * h;
        __m256 y = _mm256_mul_ps(al, sums[r][h]);
        if (!out.overwrite)
          y = _mm256_add_ps(y, _mm256_loadu_ps(row));
        _mm256_storeu_ps(row, y);
      }
    return;
  }
  alignas(32) float tile[kMR][kNR];
  for (int64_t r = 0; r < kMR; ++r)
    for (int64_t h = 0; h < 2; ++h)
      _mm256_store_ps(&tile[r][8 * h], sums[r][h]);
  storeTile(out, alpha, tile);
}
#endif

/// The tile for A's layout on this CPU.
TileFn chooseTile(Strided a) {
#if ZINC_SIMD_X86
  static const bool avx2 = simd::simdSupported(simd::IsaKind::Avx2);
  if (avx2 && a.cols == 1)
    return tileAvx2<true>;
  if (avx2 && a.rows == 1)
    return tileAvx2<false>;
#endif
  return tilePortable;
}

/// C = beta * C for a beta other than 0 and 1 (beta 0 is the tiles'
/// overwrite: C is not read, as BLAS has it).
void scaleC(float beta, float *c, int64_t m, int64_t n, int64_t ldc) {
  if (beta == 1.0f || beta == 0.0f)
    return;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      c[i * ldc + j] *= beta;
}

/// C = alpha op(A) op(B) + C (or, with `overwrite`, without C's old
/// value where a tile writes), skipping what `t` makes zero.
void blockedGemm(Strided a, Strided b, float *c, int64_t ldc, int64_t m, int64_t n, int64_t k, float alpha, bool overwrite,
                 Triangle t) {
  TileFn tile = chooseTile(a);
  alignas(64) float packedB[kKC * kNC];
  float edgeA[kMR * kKC];
  for (int64_t j0 = 0; j0 < n; j0 += kNC) {
    int64_t nc = std::min(kNC, n - j0);
    for (int64_t k0 = 0; k0 < k; k0 += kKC) {
      int64_t kc = std::min(kKC, k - k0), lo, hi;
      // The block's tiles need at most the union of their ranges, which is
      // the range of the block's own bounds.
      neededK(t, 0, m, j0, j0 + nc, k, lo, hi);
      if (std::max(lo, k0) >= std::min(hi, k0 + kc))
        continue;
      packB(b, n, j0, nc, k0, kc, std::max(lo, k0) - k0,
            std::min(hi, k0 + kc) - k0, packedB);
      for (int64_t r0 = 0; r0 < m; r0 += kMR) {
        int64_t r1 = std::min(m, r0 + kMR);
        for (int64_t jr = 0; jr < nc; jr += kNR) {
          int64_t c0 = j0 + jr, c1 = std::min(j0 + nc, c0 + kNR);
          neededK(t, r0, r1, c0, c1, k, lo, hi);
          // A tile's first k block overwrites (beta 0); later ones add.
          bool first = overwrite && lo >= k0;
          lo = std::max(lo, k0);
          hi = std::min(hi, k0 + kc);
          if (lo >= hi)
            continue;
          const float *rows = a.p + r0 * a.rows + lo * a.cols;
          int64_t ars = a.rows, acs = a.cols;
          TileFn fn = tile;
          if (r1 - r0 < kMR) { // A's last rows, padded with zeros
            for (int64_t r = 0; r < kMR; ++r)
              for (int64_t p = lo; p < hi; ++p)
                edgeA[r * kKC + p - lo] =
                    r0 + r < m ? a.p[(r0 + r) * a.rows + p * a.cols] : 0.0f;
            rows = edgeA;
            ars = kKC;
            acs = 1;
            fn = chooseTile(Strided{edgeA, kKC, 1});
          }
          TileOut out{c + r0 * ldc + c0, ldc, r1 - r0, c1 - c0, first};
          fn(hi - lo, rows, ars, acs, packedB + jr * kc + (lo - k0) * kNR,
             alpha, out);
        }
      }
    }
  }
}

} // namespace

bool triangleOf(bool lowerA, bool lowerB, bool lowerY, bool transA,
                bool transB, Triangle &out) {
  if (int(lowerA) + int(lowerB) + int(lowerY) > 1)
    return false;
  out = lowerY   ? Triangle::LowerY
        : lowerA ? (transA ? Triangle::UpperOpA : Triangle::LowerOpA)
        : lowerB ? (transB ? Triangle::UpperOpB : Triangle::LowerOpB)
                 : Triangle::None;
  return true;
}

bool triangleFits(Triangle t, int64_t m, int64_t n, int64_t k) {
  switch (t) {
  case Triangle::None:
    return true;
  case Triangle::LowerY:
    return m == n;
  case Triangle::LowerOpA:
  case Triangle::UpperOpA:
    return m == k;
  case Triangle::LowerOpB:
  case Triangle::UpperOpB:
    return k == n;
  }
  return false;
}

void triangularGemm(const GemmArgs<float> &g, Triangle t) {
  int64_t m = g.m, n = g.n, k = g.k;
  if (m <= 0 || n <= 0)
    return;
  scaleC(g.beta, g.c, m, n, g.ldc);
  bool overwrite = g.beta == 0.0f;
  Strided a{g.a, g.transA ? 1 : g.lda, g.transA ? g.lda : 1};
  Strided b{g.b, g.transB ? 1 : g.ldb, g.transB ? g.ldb : 1};
  if (g.alpha == 0.0f || k == 0) {
    if (overwrite)
      for (int64_t i = 0; i < m; ++i)
        std::fill(g.c + i * g.ldc, g.c + i * g.ldc + n, 0.0f);
  } else {
    blockedGemm(a, b, g.c, g.ldc, m, n, k, g.alpha, overwrite, t);
  }
  // LowerY's tiles above the diagonal were never written, and the ones
  // across it wrote the whole tile.
  if (t == Triangle::LowerY)
    for (int64_t i = 0; i + 1 < n; ++i)
      std::fill(g.c + i * g.ldc + i + 1, g.c + i * g.ldc + n, 0.0f);
}

} // namespace zinc::cpu
