//===- CpuAdam.h - The vectorised CPU Adam/AdamW update -------------------===//
//
// ZeRO-Offload's host optimizer step: one pass over fp32 master weights and
// fp32 moments that reads an fp32/f16/bf16 gradient and also writes the
// parameter's f16/bf16 compute copy. The arithmetic is torch.optim's
// single-tensor Adam/AdamW (PyTorch 1.13) in the order of its CPU kernels,
// the same float operations as adamReferenceSpan(), so every ISA gives the
// reference's bits. Plain pointers and sizes, no tensor types: the cpu
// backend's AdamW/Adam kernels (Optimizers.cpp) and the benchmark call it.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_OPTIM_CPUADAM_H
#define ZINC_RUNTIME_OPTIM_CPUADAM_H

#include "zinc/runtime/optim/Simd.h"
#include <cstdint>

namespace zinc::optim {

/// How a gradient or a compute copy is stored.
enum class FloatFormat { F32, F16, BF16 };

/// The per-step constants, in float, derived once per step as
/// makeAdamConstants() does (in double, as Python does).
struct AdamConstants {
  bool decoupled =
      true;        ///< AdamW (decay the weight) or Adam (L2 in the gradient)
  float decay = 1; ///< AdamW: 1 - lr * weight_decay
  float weightDecay = 0; ///< Adam: the L2 coefficient, 0 for none
  float beta1 = 0.9f, beta2 = 0.999f;
  float oneMinusBeta1 = 0.1f, oneMinusBeta2 = 0.001f;
  float stepSize = 1e-3f; ///< lr / (1 - beta1^step)
  float bias2Sqrt = 1;    ///< sqrt(1 - beta2^step)
  float eps = 1e-8f;
  bool unscale =
      false; ///< fp16 loss scaling: multiply the gradient by invScale
  float invScale = 1;
  /// --clip-grad-norm: then multiply it by clipCoef (after unscaling, as
  /// clip_grad_norm_ follows GradScaler.unscale_).
  bool clip = false;
  float clipCoef = 1;
};

/// The constants of update number `step` (1-based, as torch.optim's
/// state['step'] after its increment). `scale` is fp16 loss scaling's
/// current scale, or null without loss scaling.
AdamConstants makeAdamConstants(bool decoupled, double lr, double beta1,
                                double beta2, double eps, double weightDecay,
                                int64_t step, const float *scale);

/// The buffers of one parameter, all of `n` elements.
struct AdamBuffers {
  float *param = nullptr;
  float *expAvg = nullptr;
  float *expAvgSq = nullptr;
  const void *grad = nullptr;
  FloatFormat gradFormat = FloatFormat::F32;
  /// The compute-precision copy written in the same pass, or null.
  uint16_t *copy = nullptr;
  FloatFormat copyFormat = FloatFormat::BF16; ///< F16 or BF16
};

/// Updates elements [begin, end) on the calling thread.
using AdamSpanFn = void (*)(const AdamConstants &, const AdamBuffers &,
                            int64_t begin, int64_t end);

/// The scalar reference, one element at a time in PyTorch's order. It is
/// also the fallback and the vector kernels' tail.
void adamReferenceSpan(const AdamConstants &c, const AdamBuffers &b,
                       int64_t begin, int64_t end);
/// The vector kernels, exposed so tests can run each ISA the CPU has; call
/// them only where simd::simdSupported() says so.
void adamSpanAvx2(const AdamConstants &c, const AdamBuffers &b, int64_t begin,
                  int64_t end);
void adamSpanAvx512(const AdamConstants &c, const AdamBuffers &b, int64_t begin,
                    int64_t end);

/// The span kernel of `isa`.
AdamSpanFn adamSpanFor(simd::IsaKind isa);

/// The ISA cpuAdam() uses by default: the widest the CPU has, chosen once.
/// ZINC_CPU_ADAM_ISA=scalar|avx2|avx512 narrows it (never widens it past
/// what the CPU runs).
simd::IsaKind cpuAdamIsa();

/// Elements per OpenMP work item: 16K fp32 elements are 64 KiB per stream.
constexpr int64_t kAdamTile = 16 * 1024;

/// One update of `n` elements: OpenMP threads over kAdamTile-element tiles
/// (one thread below 4 tiles), each tile by `isa`'s kernel.
void cpuAdam(const AdamConstants &c, const AdamBuffers &b, int64_t n,
             simd::IsaKind isa);
inline void cpuAdam(const AdamConstants &c, const AdamBuffers &b, int64_t n) {
  cpuAdam(c, b, n, cpuAdamIsa());
}

} // namespace zinc::optim

#endif
