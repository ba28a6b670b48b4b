//===- PoolGrad.cpp - Gradients of MaxPool and AveragePool (cpu kernels) --===//
//
// Both walk the forward's windows (PoolWindows.h) again: MaxPool routes each
// output gradient to the position its window's maximum came from (the
// window is recomputed from X rather than read from Indices, which the
// exporter usually drops), AveragePool spreads it evenly over the window's
// real inputs. Windows overlap when strides are below the kernel, so each
// plane accumulates in the compute type and is rounded once: in dX itself
// for f32 and f64, in the call's workspace for the 16-bit floats; threads
// own whole planes.
//
//===----------------------------------------------------------------------===//
#include "../Kernels.h"
#include "../PoolWindows.h"
#include "llvm/ADT/Twine.h"

namespace zinc::cpu {

/// Below this many window reads a gradient runs on one thread.
static constexpr int64_t kParallelWork = 1 << 16;

/// Checks that dY, X (when given) and dX share one float type and that dX
/// has X's shape.
static llvm::Error checkPoolGradOperands(llvm::StringRef op,
                                         const TensorRef *dy,
                                         const TensorRef *x,
                                         const TensorRef *dx, bool needsX) {
  if (!dy || !dx || (needsX && !x))
    return kernelError(op + (needsX ? ": needs inputs dY, X and output dX"
                                    : ": needs input dY and output dX"));
  if (!isFloatDType(dy->dtype) || dx->dtype != dy->dtype ||
      (x && x->dtype != dy->dtype))
    return kernelError(op + ": unsupported element types (dY " +
                       dtypeName(dy->dtype) + ", dX " + dtypeName(dx->dtype) +
                       ")");
  if (x && x->shape != dx->shape)
    return kernelError(op + ": dX " + formatShape(dx->shape) +
                       " must have the shape of X " + formatShape(x->shape));
  return llvm::Error::success();
}

/// The compute-type accumulators of dX: dX itself when T is the compute
/// type, else a piece of the call's workspace (every plane's, since threads
/// take planes).
template <typename T>
static llvm::Expected<ComputeT<T> *> accumulators(const KernelCall &call,
                                                  TensorRef &dx) {
  using C = ComputeT<T>;
  if constexpr (std::is_same_v<T, C>)
    return dx.as<C>();
  else
    return call.scratch<C>(dx.numElements());
}

template <typename T>
static void maxPoolGrad(const Pool3 &p, const T *dy, const T *x, T *dx,
                        ComputeT<T> *accs) {
  using C = ComputeT<T>;
  int64_t work = p.planes * p.outPlane;
  parallelFor(p.planes, work > kParallelWork, [&](int64_t plane) {
    C *acc = accs + plane * p.inPlane;
    std::fill(acc, acc + p.inPlane, C(0));
    const T *dyp = dy + plane * p.outPlane;
    forEachWindowMax(p, x + plane * p.inPlane,
                     [&](int64_t o, auto, int64_t i0, int64_t i1, int64_t i2) {
                       acc[(i0 * p.in[1] + i1) * p.in[2] + i2] += load(dyp[o]);
                     });
    if constexpr (!std::is_same_v<T, C>) {
      T *dxp = dx + plane * p.inPlane;
      for (int64_t i = 0; i < p.inPlane; ++i)
        dxp[i] = store<T>(acc[i]);
    }
  });
}

/// zinc.MaxPoolGrad(dY, X) -> dX, with MaxPool's attributes.
llvm::Error runMaxPoolGrad(const KernelCall &call) {
  const TensorRef *dy = call.input(0), *x = call.input(1);
  TensorRef *dx = call.output(0);
  if (llvm::Error err =
          checkPoolGradOperands("MaxPoolGrad", dy, x, dx, /*needsX=*/true))
    return err;
  bool ceilMode = call.attrs.getInt("ceil_mode", 0) != 0;
  auto g = poolGeometry(call, *x, *dy, ceilMode, /*allowDilations=*/true);
  if (!g)
    return g.takeError();
  if (g->hasEmptyWindow())
    return kernelError("unsupported: MaxPoolGrad with a window that lies "
                       "entirely in padding");
  auto pool = makePool3(call, *g, x->shape[0] * x->shape[1]);
  if (!pool)
    return pool.takeError();
  return visitDType(x->dtype, [&](auto tag) -> llvm::Error {
    using T = decltype(tag);
    if constexpr (isFloatStorage<T>()) {
      auto acc = accumulators<T>(call, *dx);
      if (!acc)
        return acc.takeError();
      maxPoolGrad<T>(*pool, dy->as<const T>(), x->as<const T>(), dx->as<T>(),
                     *acc);
    }
    return llvm::Error::success();
  });
}

template <typename T>
static void averagePoolGrad(const Pool3 &p, const T *dy, T *dx,
                            bool countIncludePad, ComputeT<T> *accs) {
  using C = ComputeT<T>;
  int64_t work = p.planes * p.outPlane;
  parallelFor(p.planes, work > kParallelWork, [&](int64_t plane) {
    C *acc = accs + plane * p.inPlane;
    std::fill(acc, acc + p.inPlane, C(0));
    const T *dyp = dy + plane * p.outPlane;
    int64_t o = 0;
    for (int64_t o0 = 0; o0 < p.out[0]; ++o0)
      for (int64_t o1 = 0; o1 < p.out[1]; ++o1)
        for (int64_t o2 = 0; o2 < p.out[2]; ++o2, ++o) {
          int64_t f0 = p.taps[0].first[o0], l0 = p.taps[0].last[o0];
          int64_t f1 = p.taps[1].first[o1], l1 = p.taps[1].last[o1];
          int64_t f2 = p.taps[2].first[o2], l2 = p.taps[2].last[o2];
          // The divisor the forward used; padding taps read zeros, so only
          // the real inputs receive a share.
          int64_t count = countIncludePad
                              ? p.taps[0].padded[o0] * p.taps[1].padded[o1] *
                                    p.taps[2].padded[o2]
                              : (l0 - f0) * (l1 - f1) * (l2 - f2);
          C share = load(dyp[o]) / static_cast<C>(count);
          for (int64_t j0 = f0; j0 < l0; ++j0) {
            int64_t i0 = p.start[0][o0] + j0 * p.dil[0];
            for (int64_t j1 = f1; j1 < l1; ++j1) {
              int64_t i1 = p.start[1][o1] + j1 * p.dil[1];
              C *row = acc + (i0 * p.in[1] + i1) * p.in[2];
              for (int64_t j2 = f2; j2 < l2; ++j2)
                row[p.start[2][o2] + j2 * p.dil[2]] += share;
            }
          }
        }
    if constexpr (!std::is_same_v<T, C>) {
      T *dxp = dx + plane * p.inPlane;
      for (int64_t i = 0; i < p.inPlane; ++i)
        dxp[i] = store<T>(acc[i]);
    }
  });
}

/// zinc.AveragePoolGrad(dY) -> dX, with AveragePool's attributes; dX's
/// shape is the forward input's.
llvm::Error runAveragePoolGrad(const KernelCall &call) {
  const TensorRef *dy = call.input(0);
  TensorRef *dx = call.output(0);
  if (llvm::Error err = checkPoolGradOperands("AveragePoolGrad", dy, nullptr,
                                              dx, /*needsX=*/false))
    return err;
  bool ceilMode = call.attrs.getInt("ceil_mode", 0) != 0;
  bool countIncludePad = call.attrs.getInt("count_include_pad", 0) != 0;
  auto g = poolGeometry(call, *dx, *dy, ceilMode, /*allowDilations=*/true);
  if (!g)
    return g.takeError();
  auto pool = makePool3(call, *g, dx->shape[0] * dx->shape[1]);
  if (!pool)
    return pool.takeError();
  const Pool3 &p = *pool;
  for (size_t a = 0; a < 3; ++a)
    for (int64_t o = 0; o < p.out[a]; ++o) {
      int64_t n = countIncludePad ? p.taps[a].padded[o]
                                  : p.taps[a].last[o] - p.taps[a].first[o];
      if (n <= 0)
        return kernelError("unsupported: AveragePoolGrad with a window that "
                           "covers no input" +
                           llvm::Twine(countIncludePad ? " or padding" : ""));
    }
  return visitDType(dx->dtype, [&](auto tag) -> llvm::Error {
    using T = decltype(tag);
    if constexpr (isFloatStorage<T>()) {
      auto acc = accumulators<T>(call, *dx);
      if (!acc)
        return acc.takeError();
      averagePoolGrad<T>(p, dy->as<const T>(), dx->as<T>(), countIncludePad,
                         *acc);
    }
    return llvm::Error::success();
  });
}

} // namespace zinc::cpu
