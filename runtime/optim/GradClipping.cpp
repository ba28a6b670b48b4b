//===- GradClipping.cpp - the sum of squares clip_grad_norm_ starts from --===//
//
// SumGradSquares(sum, scale, grads...) adds the squares of each gradient's
// elements into `sum`, which the updates then turn into clip_grad_norm_'s
// coefficient (GradClipping.h). Under fp16 loss scaling (`scale` given)
// each element is first unscaled in float, as GradScaler.unscale_ leaves
// the gradients clip_grad_norm_ reads. Fixed-size
// chunks are summed in double, and the chunk sums added in order, so the
// result does not depend on the thread count: a resumed run and a run with
// other OMP_NUM_THREADS clip alike.
//
//===----------------------------------------------------------------------===//
#include "zinc/runtime/cpu/Kernel.h"
#include "zinc/runtime/cpu/Parallel.h"
#include "zinc/support/Error.h"
#include "zinc/support/Float16.h"
#include <vector>

namespace zinc::cpu {

/// Elements per chunk: large enough that a chunk is worth a thread.
constexpr int64_t kSquaresChunk = 1 << 15;

/// The sum of value(i)^2 over [0, n), in double.
template <typename Fn> static double sumOfSquares(int64_t n, Fn &&value) {
  int64_t chunks = (n + kSquaresChunk - 1) / kSquaresChunk;
  std::vector<double> partial(static_cast<size_t>(chunks), 0.0);
  parallelFor(chunks, chunks > 1, [&](int64_t c) {
    int64_t end = std::min(n, (c + 1) * kSquaresChunk);
    double s = 0;
    for (int64_t i = c * kSquaresChunk; i < end; ++i) {
      double v = value(i);
      s += v * v;
    }
    partial[static_cast<size_t>(c)] = s;
  });
  double total = 0;
  for (double s : partial)
    total += s;
  return total;
}

static bool isScalar(const TensorRef *t) {
  return t && t->dtype == DType::F32 && t->numElements() == 1;
}

llvm::Error runSumGradSquares(const KernelCall &call) {
  const TensorRef *start = call.input(0), *scale = call.input(1);
  if (call.inputs.size() < 3 || !isScalar(start) || (scale && !isScalar(scale)))
    return makeError("SumGradSquares expects the sum f32[], the loss scale f32[] or "
                     "none, and gradients");
  // GradScaler's inv_scale: the reciprocal in double, rounded to float.
  const float inv = scale ? static_cast<float>(1.0 / *scale->as<float>()) : 1.0f;
  TensorRef *sum = call.updated(0);
  if (!sum)
    return makeError("SumGradSquares: the sum is not declared written (Ops.def)");
  double total = call.attrs.getInt("accumulate", 0) != 0 ? *start->as<float>() : 0.0;
  for (size_t k = 2; k < call.inputs.size(); ++k) {
    const TensorRef *g = call.inputs[k];
    if (!g)
      continue;
    int64_t n = g->numElements();
    switch (g->dtype) {
    case DType::F32: {
      const float *p = g->as<float>();
      total += sumOfSquares(n, [p, inv](int64_t i) { return p[i] * inv; });
      break;
    }
    case DType::F16: {
      const uint16_t *p = g->as<uint16_t>();
      total += sumOfSquares(n, [p, inv](int64_t i) { return halfToFloat(p[i]) * inv; });
      break;
    }
    case DType::BF16: {
      const uint16_t *p = g->as<uint16_t>();
      total += sumOfSquares(n, [p, inv](int64_t i) { return bf16ToFloat(p[i]) * inv; });
      break;
    }
    default:
      return makeError("SumGradSquares: gradient " + llvm::Twine(k - 2) +
                       " is not f32, f16 or bf16");
    }
  }
  *sum->as<float>() = static_cast<float>(total);
  return llvm::Error::success();
}

} // namespace zinc::cpu
