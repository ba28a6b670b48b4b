//===- RmsNorm.cpp - zinc.RmsNorm and its gradient on the cpu -------------===//
//
// Over the last axis, row by row: r = 1 / sqrt(mean(x^2) + epsilon),
// y = x r (fuse-rms-norm makes this of Llama's spelled-out formula; the
// weight stays a Mul after it). The gradient, with n = x r:
//   dx = r (dy - n mean(dy n)).
// Row sums accumulate in double; the rest is done in the compute type and
// rounded once, in the order PyTorch's eager ops round (mean, + epsilon,
// rsqrt, product).
//
//===----------------------------------------------------------------------===//
#include "KernelUtil.h"
#include "Kernels.h"
#include "llvm/ADT/Twine.h"
#include <cmath>

namespace zinc::cpu {

/// Checks x (and dy) against the output: one float type, one shape, rank
/// at least 1.
static llvm::Error checkRmsOperands(const KernelCall &call, size_t inputs) {
  const TensorRef *x = call.input(0);
  const TensorRef *y = call.output(0);
  if (!x || !y || (inputs > 1 && !call.input(1)))
    return kernelError(call.opType + ": missing an operand");
  for (size_t i = 0; i < inputs; ++i)
    if (call.input(i)->dtype != x->dtype || call.input(i)->shape != x->shape)
      return kernelError(call.opType + ": operands differ in type or shape");
  if (y->dtype != x->dtype || y->shape != x->shape)
    return kernelError(call.opType + ": output differs from x in type or shape");
  if (!isFloatDType(x->dtype) || x->rank() == 0)
    return kernelError("unsupported: " + call.opType + " with element type " +
                       dtypeName(x->dtype) + " and shape " +
                       formatShape(x->shape));
  return llvm::Error::success();
}

/// 1 / sqrt(mean(x^2) + epsilon) of a row of d elements.
template <typename T, typename C>
static C inverseRms(const T *row, int64_t d, double epsilon) {
  double sum = 0;
  for (int64_t j = 0; j < d; ++j) {
    double v = static_cast<double>(load(row[j]));
    sum += v * v;
  }
  C mean = static_cast<C>(d ? sum / static_cast<double>(d) : 0.0);
  return C(1) / std::sqrt(mean + static_cast<C>(epsilon));
}

llvm::Error runRmsNorm(const KernelCall &call) {
  if (auto err = checkRmsOperands(call, 1))
    return err;
  const TensorRef &x = *call.input(0);
  TensorRef &y = *call.output(0);
  double epsilon = call.attrs.getFloat("epsilon", 1e-6);
  int64_t d = x.shape.back(), rows = d ? x.numElements() / d : 0;
  visitDType(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (isFloatStorage<T>()) {
      using C = ComputeT<T>;
      const T *px = x.as<const T>();
      T *py = y.as<T>();
      parallelRanges(rows, x.byteSize() * 2, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
          const T *row = px + r * d;
          C inv = inverseRms<T, C>(row, d, epsilon);
          for (int64_t j = 0; j < d; ++j)
            py[r * d + j] = store<T>(load(row[j]) * inv);
        }
      });
    }
  });
  return llvm::Error::success();
}

/// RmsNormGrad(x, dy) {epsilon} -> dx.
llvm::Error runRmsNormGrad(const KernelCall &call) {
  if (auto err = checkRmsOperands(call, 2))
    return err;
  const TensorRef &x = *call.input(0), &dy = *call.input(1);
  TensorRef &dx = *call.output(0);
  double epsilon = call.attrs.getFloat("epsilon", 1e-6);
  int64_t d = x.shape.back(), rows = d ? x.numElements() / d : 0;
  visitDType(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (isFloatStorage<T>()) {
      using C = ComputeT<T>;
      const T *px = x.as<const T>(), *pg = dy.as<const T>();
      T *po = dx.as<T>();
      parallelRanges(rows, x.byteSize() * 3, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
          const T *xr = px + r * d, *gr = pg + r * d;
          C inv = inverseRms<T, C>(xr, d, epsilon);
          double dot = 0;
          for (int64_t j = 0; j < d; ++j)
            dot += static_cast<double>(load(gr[j])) *
                   static_cast<double>(load(xr[j]) * inv);
          C meanDot = static_cast<C>(dot / static_cast<double>(d));
          for (int64_t j = 0; j < d; ++j) {
            C n = load(xr[j]) * inv;
            po[r * d + j] = store<T>(inv * (load(gr[j]) - n * meanDot));
          }
        }
      });
    }
  });
  return llvm::Error::success();
}

} // namespace zinc::cpu
