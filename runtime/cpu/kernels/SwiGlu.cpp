//===- SwiGlu.cpp - zinc.SwiGlu and its gradient on the cpu ---------------===//
//
// The gated unit of Llama's MLP, fused by fuse-swiglu:
//   y = silu(gate) up,   silu(g) = g / (1 + exp(-g))
// and both operands' gradients in one pass over dy:
//   dup = dy silu(gate),  dgate = (dy up) s (1 + gate (1 - s)), s =
//   sigmoid(gate)
// rounded as PyTorch's silu, mul and silu_backward round. f32 takes
// exp(-gate) from RowMath's vectorised exp a chunk at a time (PyTorch's
// silu is vectorised too); the rest of each loop is plain arithmetic the
// compiler vectorises.
//
//===----------------------------------------------------------------------===//
#include "KernelUtil.h"
#include "Kernels.h"
#include "zinc/runtime/cpu/RowMath.h"
#include "llvm/ADT/Twine.h"
#include <algorithm>
#include <cmath>

namespace zinc::cpu {

/// Checks `inputs` inputs and `outputs` outputs: present, one float type,
/// one shape.
static llvm::Error checkSwiGlu(const KernelCall &call, size_t inputs,
                               size_t outputs) {
  const TensorRef *gate = call.input(0);
  if (!gate)
    return kernelError(call.opType + ": missing input 0");
  auto same = [&](const TensorRef *t) {
    return t && t->dtype == gate->dtype && t->shape == gate->shape;
  };
  for (size_t i = 1; i < inputs; ++i)
    if (!same(call.input(i)))
      return kernelError(
          call.opType + ": input " + llvm::Twine(i) +
          " is missing or differs from input 0 in type or shape");
  for (size_t i = 0; i < outputs; ++i)
    if (!same(call.output(i)))
      return kernelError(
          call.opType + ": output " + llvm::Twine(i) +
          " is missing or differs from input 0 in type or shape");
  if (!isFloatDType(gate->dtype))
    return kernelError("unsupported: " + call.opType + " with element type " +
                       dtypeName(gate->dtype));
  return llvm::Error::success();
}

/// Elements per chunk of the f32 loops: exp(-gate) of a chunk stays in L1.
constexpr int64_t kChunk = 512;

/// Calls fn(begin, n, e) over [0, count) in chunks, e[j] = exp(-gate[begin +
/// j]), in parallel when `workBytes` pays for it.
template <typename Fn>
static void forExpChunks(const float *gate, int64_t count, size_t workBytes,
                         Fn fn) {
  const RowMath &rm = rowMath();
  parallelRanges(count, workBytes, [&](int64_t begin, int64_t end) {
    float e[kChunk];
    for (int64_t i = begin; i < end; i += kChunk) {
      int64_t n = std::min(kChunk, end - i);
      for (int64_t j = 0; j < n; ++j)
        e[j] = -gate[i + j];
      rm.exp(e, e, n);
      fn(i, n, e);
    }
  });
}

/// SwiGlu(gate, up) -> y.
llvm::Error runSwiGlu(const KernelCall &call) {
  if (auto err = checkSwiGlu(call, 2, 1))
    return err;
  const TensorRef &gate = *call.input(0), &up = *call.input(1);
  TensorRef &y = *call.output(0);
  if (gate.dtype == DType::F32) {
    const float *pg = gate.as<const float>(), *pu = up.as<const float>();
    float *py = y.as<float>();
    forExpChunks(pg, gate.numElements(), gate.byteSize() * 3,
                 [&](int64_t i, int64_t n, const float *e) {
                   for (int64_t j = 0; j < n; ++j)
                     py[i + j] = pg[i + j] / (1.0f + e[j]) * pu[i + j];
                 });
    return llvm::Error::success();
  }
  visitDType(gate.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (isFloatStorage<T>()) {
      using C = ComputeT<T>;
      const T *pg = gate.as<const T>(), *pu = up.as<const T>();
      T *py = y.as<T>();
      parallelRanges(gate.numElements(), gate.byteSize() * 3,
                     [&](int64_t begin, int64_t end) {
                       for (int64_t i = begin; i < end; ++i) {
                         C g = load(pg[i]);
                         C act = load(store<T>(g / (C(1) + std::exp(-g))));
                         py[i] = store<T>(act * load(pu[i]));
                       }
                     });
    }
  });
  return llvm::Error::success();
}

/// SwiGluGrad(gate, up, dy) -> (dgate, dup).
llvm::Error runSwiGluGrad(const KernelCall &call) {
  if (auto err = checkSwiGlu(call, 3, 2))
    return err;
  const TensorRef &gate = *call.input(0), &up = *call.input(1),
                  &dy = *call.input(2);
  TensorRef &dgate = *call.output(0), &dup = *call.output(1);
  if (gate.dtype == DType::F32) {
    const float *pg = gate.as<const float>(), *pu = up.as<const float>(),
                *pd = dy.as<const float>();
    float *odg = dgate.as<float>(), *odu = dup.as<float>();
    forExpChunks(pg, gate.numElements(), gate.byteSize() * 5,
                 [&](int64_t i, int64_t n, const float *e) {
                   for (int64_t j = 0; j < n; ++j) {
                     float g = pg[i + j], d = pd[i + j];
                     float s = 1.0f / (1.0f + e[j]);
                     odu[i + j] = d * (g / (1.0f + e[j]));
                     odg[i + j] =
                         (d * pu[i + j]) * (s * (1.0f + g * (1.0f - s)));
                   }
                 });
    return llvm::Error::success();
  }
  visitDType(gate.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (isFloatStorage<T>()) {
      using C = ComputeT<T>;
      const T *pg = gate.as<const T>(), *pu = up.as<const T>(),
              *pd = dy.as<const T>();
      T *odg = dgate.as<T>(), *odu = dup.as<T>();
      parallelRanges(gate.numElements(), gate.byteSize() * 5,
                     [&](int64_t begin, int64_t end) {
                       for (int64_t i = begin; i < end; ++i) {
                         C g = load(pg[i]), d = load(pd[i]);
                         C e = std::exp(-g);
                         C act = load(store<T>(g / (C(1) + e)));
                         C s = C(1) / (C(1) + e);
                         C dact = load(store<T>(d * load(pu[i])));
                         odu[i] = store<T>(d * act);
                         odg[i] =
                             store<T>(dact * (s * (C(1) + g * (C(1) - s))));
                       }
                     });
    }
  });
  return llvm::Error::success();
}

} // namespace zinc::cpu
