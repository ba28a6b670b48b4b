//===- GradClipping.h - clip_grad_norm_'s coefficient, for every backend --===//
//
// torch.nn.utils.clip_grad_norm_(params, max_norm) multiplies every gradient
// by clamp(max_norm / (total_norm + 1e-6), max=1), total_norm the 2-norm of
// all of them, in float; `max_norm / tensor` is tensor.reciprocal() *
// max_norm there, two roundings, which the coefficient repeats. The
// clip-grad-norm pass gives each update the sum of every gradient's squares
// (unscaled, under fp16 loss scaling, as GradScaler.unscale_ comes first)
// and the `max_grad_norm` attribute; the update derives the coefficient
// here. A non-finite norm gives NaN or 0, as torch.clamp passes NaN
// through; loss scaling skips such steps anyway. Marked for the GPU in .cu
// files, where the sum lives on the device.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_SUPPORT_GRADCLIPPING_H
#define ZINC_SUPPORT_GRADCLIPPING_H

#include <math.h>

#ifdef __CUDACC__
#define ZINC_CLIP_HD __host__ __device__ inline
#else
#define ZINC_CLIP_HD inline
#endif

namespace zinc {

/// The factor of every (unscaled) gradient, from the sum of their squares.
ZINC_CLIP_HD float clipCoefficient(float sumSquares, float maxNorm) {
#ifdef __CUDA_ARCH__
  // Rounded operations: nvcc would contract the multiply and add into one.
  float coef = __fmul_rn(__fdiv_rn(1.0f, __fadd_rn(__fsqrt_rn(sumSquares), 1e-6f)), maxNorm);
#else
  float coef = (1.0f / (sqrtf(sumSquares) + 1e-6f)) * maxNorm;
#endif
  return coef > 1.0f ? 1.0f : coef;
}

} // namespace zinc

#undef ZINC_CLIP_HD

#endif
