//===- Pool.cpp - MaxPool, AveragePool and GlobalAveragePool cpu kernels --===//
//
// Windows come from WindowGeometry, so the pads of auto_pad and the sizes of
// ceil mode are the same ones Conv uses. Up to three spatial axes are
// handled by one loop nest: 1-D and 2-D pools run as 3-D pools whose leading
// axes have size 1.
//
//===----------------------------------------------------------------------===//
#include "KernelUtil.h"
#include "Kernels.h"
#include "PoolWindows.h"
#include "llvm/ADT/Twine.h"

namespace zinc::cpu {

/// Below this many window reads a pool runs on one thread.
static constexpr int64_t kParallelWork = 1 << 16;

template <typename T>
static void maxPool(const Pool3 &p, const T *x, T *y, int64_t *indices,
                    bool columnMajor) {
  int64_t work = p.planes * p.outPlane;
  parallelFor(p.planes, work > kParallelWork, [&](int64_t plane) {
    T *yp = y + plane * p.outPlane;
    int64_t *ip = indices ? indices + plane * p.outPlane : nullptr;
    forEachWindowMax(
        p, x + plane * p.inPlane,
        [&](int64_t o, auto best, int64_t i0, int64_t i1, int64_t i2) {
          yp[o] = store<T>(best);
          if (!ip)
            return;
          // The index counts from the start of the whole
          // tensor; column major (storage_order 1) only
          // reorders the spatial axes.
          int64_t spatial = columnMajor
                                ? i0 + i1 * p.in[0] + i2 * p.in[0] * p.in[1]
                                : (i0 * p.in[1] + i1) * p.in[2] + i2;
          ip[o] = plane * p.inPlane + spatial;
        });
  });
}

llvm::Error runMaxPool(const KernelCall &call) {
  const TensorRef *x = call.input(0);
  TensorRef *y = call.output(0);
  TensorRef *indices = call.output(1);
  if (!x || !y)
    return kernelError("MaxPool: needs input X and output Y");
  if (x->dtype == DType::Bool || y->dtype != x->dtype)
    return kernelError("MaxPool: unsupported element types " +
                       dtypeName(x->dtype) + " -> " + dtypeName(y->dtype));
  if (indices && (indices->dtype != DType::I64 || indices->shape != y->shape))
    return kernelError("MaxPool: Indices must be i64 with the shape of Y");
  bool ceilMode = call.attrs.getInt("ceil_mode", 0) != 0;
  auto g = poolGeometry(call, *x, *y, ceilMode, /*allowDilations=*/true);
  if (!g)
    return g.takeError();
  int64_t storageOrder = call.attrs.getInt("storage_order", 0);
  if (storageOrder != 0 && storageOrder != 1)
    return kernelError("MaxPool: storage_order must be 0 or 1, got " +
                       llvm::Twine(storageOrder));
  if (g->hasEmptyWindow())
    return kernelError("unsupported: MaxPool with a window that lies entirely "
                       "in padding");
  auto pool = makePool3(call, *g, x->shape[0] * x->shape[1]);
  if (!pool)
    return pool.takeError();
  const Pool3 &p = *pool;
  visitDType(x->dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>)
      maxPool<T>(p, x->as<const T>(), y->as<T>(),
                 indices ? indices->as<int64_t>() : nullptr, storageOrder == 1);
  });
  return llvm::Error::success();
}

template <typename T>
static void averagePool(const Pool3 &p, const T *x, T *y,
                        bool countIncludePad) {
  using C = ComputeT<T>;
  int64_t work = p.planes * p.outPlane;
  parallelFor(p.planes, work > kParallelWork, [&](int64_t plane) {
    const T *xp = x + plane * p.inPlane;
    int64_t yo = plane * p.outPlane;
    for (int64_t o0 = 0; o0 < p.out[0]; ++o0)
      for (int64_t o1 = 0; o1 < p.out[1]; ++o1)
        for (int64_t o2 = 0; o2 < p.out[2]; ++o2, ++yo) {
          int64_t f0 = p.taps[0].first[o0], l0 = p.taps[0].last[o0];
          int64_t f1 = p.taps[1].first[o1], l1 = p.taps[1].last[o1];
          int64_t f2 = p.taps[2].first[o2], l2 = p.taps[2].last[o2];
          C sum = 0;
          for (int64_t j0 = f0; j0 < l0; ++j0) {
            int64_t i0 = p.start[0][o0] + j0 * p.dil[0];
            for (int64_t j1 = f1; j1 < l1; ++j1) {
              int64_t i1 = p.start[1][o1] + j1 * p.dil[1];
              const T *row = xp + (i0 * p.in[1] + i1) * p.in[2];
              for (int64_t j2 = f2; j2 < l2; ++j2)
                sum += load(row[p.start[2][o2] + j2 * p.dil[2]]);
            }
          }
          int64_t count = countIncludePad
                              ? p.taps[0].padded[o0] * p.taps[1].padded[o1] *
                                    p.taps[2].padded[o2]
                              : (l0 - f0) * (l1 - f1) * (l2 - f2);
          y[yo] = store<T>(sum / static_cast<C>(count));
        }
  });
}

llvm::Error runAveragePool(const KernelCall &call) {
  const TensorRef *x = call.input(0);
  TensorRef *y = call.output(0);
  if (!x || !y)
    return kernelError("AveragePool: needs input X and output Y");
  if (!isFloatDType(x->dtype) || y->dtype != x->dtype)
    return kernelError("AveragePool: unsupported element types " +
                       dtypeName(x->dtype) + " -> " + dtypeName(y->dtype));
  bool ceilMode = call.attrs.getInt("ceil_mode", 0) != 0;
  bool countIncludePad = call.attrs.getInt("count_include_pad", 0) != 0;
  // dilations joined AveragePool in opset 19; a model that sets it anyway is
  // honoured rather than silently ignored.
  auto g = poolGeometry(call, *x, *y, ceilMode, /*allowDilations=*/true);
  if (!g)
    return g.takeError();
  auto pool = makePool3(call, *g, x->shape[0] * x->shape[1]);
  if (!pool)
    return pool.takeError();
  const Pool3 &p = *pool;
  // A window with nothing to divide by has no defined average.
  for (size_t a = 0; a < 3; ++a)
    for (int64_t o = 0; o < p.out[a]; ++o) {
      int64_t n = countIncludePad ? p.taps[a].padded[o]
                                  : p.taps[a].last[o] - p.taps[a].first[o];
      if (n <= 0)
        return kernelError("unsupported: AveragePool with a window that "
                           "covers no input" +
                           llvm::Twine(countIncludePad ? " or padding" : ""));
    }
  visitDType(x->dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (isFloatStorage<T>())
      averagePool<T>(p, x->as<const T>(), y->as<T>(), countIncludePad);
  });
  return llvm::Error::success();
}

llvm::Error runGlobalAveragePool(const KernelCall &call) {
  const TensorRef *x = call.input(0);
  TensorRef *y = call.output(0);
  if (!x || !y)
    return kernelError("GlobalAveragePool: needs input X and output Y");
  if (!isFloatDType(x->dtype) || y->dtype != x->dtype)
    return kernelError("GlobalAveragePool: unsupported element types " +
                       dtypeName(x->dtype) + " -> " + dtypeName(y->dtype));
  if (x->rank() < 2 || y->rank() != x->rank() || y->shape[0] != x->shape[0] ||
      y->shape[1] != x->shape[1] ||
      y->numElements() != x->shape[0] * x->shape[1])
    return kernelError("GlobalAveragePool: output shape " +
                       formatShape(y->shape) + " does not match input shape " +
                       formatShape(x->shape));
  int64_t planes = x->shape[0] * x->shape[1];
  int64_t spatial = planes ? x->numElements() / planes : 0;
  visitDType(x->dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (isFloatStorage<T>()) {
      const T *xs = x->as<const T>();
      T *ys = y->as<T>();
      // A double accumulator keeps large feature maps accurate in f32.
      parallelFor(planes, planes * spatial > kParallelWork, [&](int64_t plane) {
        const T *xp = xs + plane * spatial;
        double sum = 0;
        for (int64_t i = 0; i < spatial; ++i)
          sum += static_cast<double>(load(xp[i]));
        ys[plane] = store<T>(
            static_cast<ComputeT<T>>(sum / static_cast<double>(spatial)));
      });
    }
  });
  return llvm::Error::success();
}

} // namespace zinc::cpu
