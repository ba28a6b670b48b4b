//===- Scan.cpp - CumSum on the cpu ---------------------------------------===//
//
// The tensor is viewed as [outer, n, inner] around the axis; each outer
// slab is scanned along n with `inner` running sums side by side, so the
// innermost loop is contiguous. Floats accumulate in double, as PyTorch's
// cpu cumsum does (its accumulate type), integers wrap.
//
//===----------------------------------------------------------------------===//
#include "KernelUtil.h"
#include "Kernels.h"
#include "llvm/ADT/Twine.h"
#include <type_traits>

namespace zinc::cpu {

/// CumSum(x, axis) {exclusive, reverse}.
llvm::Error runCumSum(const KernelCall &call) {
  const TensorRef *x = call.input(0), *axisT = call.input(1);
  TensorRef *y = call.output(0);
  if (!x || !axisT || !y)
    return kernelError("CumSum: expects x, axis and an output");
  if (x->dtype != y->dtype || x->shape != y->shape)
    return kernelError("CumSum: output type or shape differs from the "
                       "input's");
  if (axisT->numElements() != 1)
    return kernelError("CumSum: axis must be a scalar");
  llvm::Expected<int64_t> axis =
      normalizeAxis(loadIndex(*axisT, 0), std::max<int64_t>(x->rank(), 1));
  if (!axis)
    return axis.takeError();
  bool exclusive = call.attrs.getInt("exclusive", 0) != 0;
  bool reverse = call.attrs.getInt("reverse", 0) != 0;
  // The [outer, n, inner] view around the axis.
  llvm::Expected<SoftmaxGeometry> view =
      softmaxGeometry(x->shape, *axis, /*flatten=*/false);
  if (!view)
    return view.takeError();
  int64_t outer = view->outer, n = view->d, inner = view->inner;
  return visitDType(x->dtype, [&](auto tag) -> llvm::Error {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      return kernelError("unsupported: CumSum with element type bool");
    } else {
      using C = ComputeT<T>;
      using Acc = std::conditional_t<std::is_floating_point_v<C>, double,
                                     std::make_unsigned_t<
                                         std::conditional_t<std::is_integral_v<C>, C, int>>>;
      const T *px = x->as<const T>();
      T *py = y->as<T>();
      parallelRanges(outer * inner, x->byteSize() * 2,
                     [&](int64_t begin, int64_t end) {
        for (int64_t c = begin; c < end; ++c) {
          int64_t o = c / inner, i = c % inner;
          const T *xs = px + o * n * inner + i;
          T *ys = py + o * n * inner + i;
          Acc acc = 0;
          for (int64_t s = 0; s < n; ++s) {
            int64_t k = reverse ? n - 1 - s : s;
            Acc v = static_cast<Acc>(load(xs[k * inner]));
            if (!exclusive)
              acc += v;
            ys[k * inner] = store<T>(static_cast<C>(acc));
            if (exclusive)
              acc += v;
          }
        }
      });
      return llvm::Error::success();
    }
  });
}

} // namespace zinc::cpu
