//===- RotaryMath.h - zinc.Rotary's indexing and math, host and device ----===//
//
// One element of y = x cos + rotate_half(x) sin (and of its gradient) at a
// time, the tables broadcast to x: what Rotary.cu's kernels compute, and
// what the unit tests compare with the cpu kernel (runtime/cpu/kernels/
// Rotary.cpp) on any machine.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_CUDA_KERNELS_ROTARYMATH_H
#define ZINC_RUNTIME_CUDA_KERNELS_ROTARYMATH_H

#include "HostDevice.h"
#include <cstdint>

namespace zinc::cuda::rotary {

constexpr int kMaxRank = 8;

/// x as rows of its last axis d, and where each row finds its table row.
struct Geometry {
  int64_t d = 0;
  /// x's leading axes and the tables' strides along them (0 where the
  /// tables broadcast).
  int lead = 0;
  int64_t dims[kMaxRank] = {};
  int64_t strides[kMaxRank] = {};
  /// The tables' stride along the last axis: 1, or 0 when it broadcasts.
  int64_t step = 1;
};

/// The geometry of x's shape against the tables' (rank at most x's, each
/// axis equal to x's or 1); false when they do not broadcast to x, x's
/// last axis is odd or the rank exceeds kMaxRank.
inline bool makeGeometry(const int64_t *x, int xRank, const int64_t *table,
                         int tableRank, Geometry &g) {
  if (xRank < 1 || xRank > kMaxRank || tableRank > xRank || x[xRank - 1] % 2)
    return false;
  int64_t stride = 1;
  int64_t strides[kMaxRank] = {};
  for (int k = xRank - 1; k >= 0; --k) {
    int t = k - (xRank - tableRank);
    int64_t dim = t >= 0 ? table[t] : 1;
    if (dim != 1 && dim != x[k])
      return false;
    strides[k] = dim == 1 ? 0 : stride;
    stride *= dim;
  }
  g.d = x[xRank - 1];
  g.lead = xRank - 1;
  for (int k = 0; k < g.lead; ++k) {
    g.dims[k] = x[k];
    g.strides[k] = strides[k];
  }
  g.step = strides[xRank - 1];
  return true;
}

/// The tables' offset for column `col` of row `row` of x.
ZINC_HD int64_t tableOffset(const Geometry &g, int64_t row, int64_t col) {
  int64_t off = col * g.step;
  for (int k = g.lead - 1; k >= 0; --k) {
    off += (row % g.dims[k]) * g.strides[k];
    row /= g.dims[k];
  }
  return off;
}

/// The column paired with `col` by rotate_half.
ZINC_HD int64_t partner(int64_t col, int64_t d) {
  return col < d / 2 ? col + d / 2 : col - d / 2;
}

/// y at column col: x cos - x[col+h] sin in the first half, + x[col-h] sin
/// in the second; each product rounded, then the sum.
template <typename C>
ZINC_HD C forward(C x, C xPartner, C c, C s, bool firstHalf) {
  C a = x * c, b = xPartner * s;
  return firstHalf ? a - b : a + b;
}

/// dx at column col: dy cos + dy[col+h] sin[col+h] in the first half,
/// - dy[col-h] sin[col-h] in the second.
template <typename C>
ZINC_HD C backward(C dy, C dyPartner, C c, C sPartner, bool firstHalf) {
  C a = dy * c, b = dyPartner * sPartner;
  return firstHalf ? a + b : a - b;
}

} // namespace zinc::cuda::rotary

#endif
