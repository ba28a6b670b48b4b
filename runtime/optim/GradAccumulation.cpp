//===- GradAccumulation.cpp - Summing micro-batches' gradients ------------===//
//
// AccumulateGrad(acc, grad): the first micro-batch of an optimizer step
// stores its gradient into the f32 accumulator, the others add theirs, so a
// stale sum from the step before is never read and needs no zeroing. The
// loss gradient is already divided by the micro-batch count (build-training
// seeds it with 1/N, as `(loss / N).backward()` does), so the sum is the
// step's gradient. 16-bit gradients are widened: the sum is f32.
//
//===----------------------------------------------------------------------===//
#include "zinc/runtime/cpu/Kernel.h"
#include "zinc/runtime/cpu/Parallel.h"
#include "zinc/support/Error.h"
#include "zinc/support/Float16.h"

namespace zinc::cpu {

template <typename Read>
static void accumulate(float *acc, int64_t n, bool first, Read read) {
  parallelFor(n, n > (1 << 16), [&](int64_t i) {
    acc[i] = first ? read(i) : acc[i] + read(i);
  });
}

llvm::Error runAccumulateGrad(const KernelCall &call) {
  const TensorRef *grad = call.input(1);
  TensorRef *acc = call.updated(0);
  if (!acc || !grad || acc->dtype != DType::F32 || grad->numElements() != acc->numElements())
    return makeError("AccumulateGrad expects an f32 accumulator (declared written) and a "
                     "gradient of its element count");
  float *sum = acc->as<float>();
  int64_t n = acc->numElements();
  bool first = call.microBatch == 0;
  switch (grad->dtype) {
  case DType::F32: {
    const float *g = grad->as<float>();
    accumulate(sum, n, first, [g](int64_t i) { return g[i]; });
    return llvm::Error::success();
  }
  case DType::F16: {
    const uint16_t *g = grad->as<uint16_t>();
    accumulate(sum, n, first, [g](int64_t i) { return halfToFloat(g[i]); });
    return llvm::Error::success();
  }
  case DType::BF16: {
    const uint16_t *g = grad->as<uint16_t>();
    accumulate(sum, n, first, [g](int64_t i) { return bf16ToFloat(g[i]); });
    return llvm::Error::success();
  }
  default:
    return makeError("AccumulateGrad: the gradient is " + dtypeName(grad->dtype) +
                     ", not f32, f16 or bf16");
  }
}

} // namespace zinc::cpu
