//===- RowStats.h - A row's mean and inverse standard deviation -----------===//
//
// LayerNormalization computes its statistics in the forward kernel and its
// gradient recomputes them, so both call this one function and agree to the
// last bit. The sums are in double, in two passes (mean, then squared
// deviations), each over four interleaved partial sums added in a fixed order:
// four independent add chains instead of one (a single chain of dependent
// double adds cost ~3.5 ns an element at rows of 64), and a result that does
// not depend on the ISA or the compiler's vectorisation.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_CPU_KERNELS_ROWSTATS_H
#define ZINC_RUNTIME_CPU_KERNELS_ROWSTATS_H

#include "KernelUtil.h"
#include <cmath>
#include <cstdint>

namespace zinc::cpu {

struct RowStats {
  double mean = 0;
  double invStd = 0;
};

/// Sum of f(x[j]) over j < d: partial sums p0..p3 over j mod 4, then
/// (p0 + p1) + (p2 + p3).
template <typename T, typename F>
inline double sumOfRow(const T *x, int64_t d, F f) {
  double p0 = 0, p1 = 0, p2 = 0, p3 = 0;
  int64_t j = 0;
  for (; j + 4 <= d; j += 4) {
    p0 += f(static_cast<double>(load(x[j])));
    p1 += f(static_cast<double>(load(x[j + 1])));
    p2 += f(static_cast<double>(load(x[j + 2])));
    p3 += f(static_cast<double>(load(x[j + 3])));
  }
  double tail[3] = {0, 0, 0};
  for (int64_t k = 0; j < d; ++j, ++k)
    tail[k] = f(static_cast<double>(load(x[j])));
  p0 += tail[0];
  p1 += tail[1];
  p2 += tail[2];
  return (p0 + p1) + (p2 + p3);
}

/// mean(x) and 1 / sqrt(var(x) + epsilon) of one row of d elements.
template <typename T>
inline RowStats rowStats(const T *x, int64_t d, double epsilon) {
  RowStats s;
  s.mean = d ? sumOfRow(x, d, [](double v) { return v; }) / d : 0;
  double mean = s.mean;
  double sq = sumOfRow(x, d, [mean](double v) { return (v - mean) * (v - mean); });
  s.invStd = 1.0 / std::sqrt((d ? sq / d : 0) + epsilon);
  return s;
}

} // namespace zinc::cpu

#endif
