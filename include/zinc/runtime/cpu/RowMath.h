//===- RowMath.h - Vectorised f32 loops over contiguous rows --------------===//
//
// The inner loops of the cpu kernels that dominate a transformer's
// non-GEMM time (softmax, cross-entropy, GELU, erf), written once over the
// SIMD layer that CPU Adam uses (zinc/runtime/optim/Simd.h) and compiled for
// AVX-512, AVX2 and scalar; rowMath() picks the widest this CPU runs. The
// kernels keep their general loops for other types and layouts and call
// these for f32 rows. exp, erf and tanh are polynomial (SimdMath.h), within
// a few float ulps of the C library's.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_CPU_ROWMATH_H
#define ZINC_RUNTIME_CPU_ROWMATH_H

#include "zinc/runtime/optim/Simd.h"
#include <cstdint>

namespace zinc::cpu {

/// Rows shorter than this keep the kernels' scalar loops (in double where
/// they sum): there is little to vectorise, and the double sums keep short
/// softmaxes (a classifier's 10 classes) as exact as before.
constexpr int64_t kRowMathMinRow = 64;

/// Which GELU: the exact erf form or the tanh approximation.
enum class GeluForm { Erf, Tanh };

struct RowMath {
  simd::IsaKind isa;
  /// max(x[0..n)), -inf for an empty row.
  float (*max)(const float *x, int64_t n);
  /// sum of exp(x[j] - shift).
  float (*sumExp)(const float *x, int64_t n, float shift);
  /// y[j] = exp(x[j] - shift) * scale (y may be x).
  void (*expScale)(const float *x, float *y, int64_t n, float shift,
                   float scale);
  /// sum of a[j] * b[j].
  float (*dot)(const float *a, const float *b, int64_t n);
  /// Softmax's gradient from its output: dx = y * (dy - dot).
  void (*softmaxGrad)(const float *y, const float *dy, float *dx, int64_t n,
                      float dot);
  void (*gelu)(const float *x, float *y, int64_t n, GeluForm form);
  /// dx = dy * GELU'(x).
  void (*geluGrad)(const float *x, const float *dy, float *dx, int64_t n,
                   GeluForm form);
  void (*erf)(const float *x, float *y, int64_t n);
  /// dx = dy * 2/sqrt(pi) * exp(-x^2).
  void (*erfGrad)(const float *x, const float *dy, float *dx, int64_t n);
  /// LayerNorm's input gradient for one row, given its mean and 1/std:
  /// with g = dy * gamma and xhat = (x - mean) * rstd,
  /// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)).
  void (*layerNormGrad)(const float *x, const float *dy, const float *gamma,
                        float *dx, int64_t n, float mean, float rstd);
  /// LayerNorm's parameter gradients, one row's share: accScale[j] +=
  /// dy[j] * (x[j] - mean) * rstd and accBias[j] += dy[j] (accBias may be
  /// null), accumulated in double.
  void (*layerNormParamGrad)(const float *x, const float *dy, int64_t n,
                             float mean, float rstd, double *accScale,
                             double *accBias);
  /// Elementwise exp and tanh, for tests and the unary kernels.
  void (*exp)(const float *x, float *y, int64_t n);
  void (*tanh)(const float *x, float *y, int64_t n);
};

/// The loops for `isa` (which this CPU must run: simd::simdSupported).
const RowMath &rowMathFor(simd::IsaKind isa);
/// The loops for the widest ISA this CPU runs.
const RowMath &rowMath();

} // namespace zinc::cpu

#endif
