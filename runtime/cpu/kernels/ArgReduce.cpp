//===- ArgReduce.cpp - ArgMax and ArgMin on the cpu -----------------------===//
//
// The index of the largest (smallest) element along one axis, as int64. NaN
// counts as the extreme, as in numpy and PyTorch; ties go to the first
// index, or the last with select_last_index.
//
//===----------------------------------------------------------------------===//
#include "KernelUtil.h"
#include "Kernels.h"
#include "llvm/ADT/Twine.h"

namespace zinc::cpu {

template <bool isMax> static llvm::Error runArgExtremum(const KernelCall &call) {
  const TensorRef *x = call.input(0);
  TensorRef *y = call.output(0);
  if (!x || !y)
    return kernelError(call.opType + ": expects an input and an output");
  if (y->dtype != DType::I64)
    return kernelError(call.opType + ": the output must be i64");
  llvm::Expected<int64_t> axis =
      normalizeAxis(call.attrs.getInt("axis", 0), std::max<int64_t>(x->rank(), 1));
  if (!axis)
    return axis.takeError();
  bool last = call.attrs.getInt("select_last_index", 0) != 0;
  // The [outer, n, inner] view around the axis.
  llvm::Expected<SoftmaxGeometry> view =
      softmaxGeometry(x->shape, *axis, /*flatten=*/false);
  if (!view)
    return view.takeError();
  int64_t outer = view->outer, n = view->d, inner = view->inner;
  if (y->numElements() != outer * inner)
    return kernelError(call.opType + ": output shape " +
                       formatShape(y->shape) + " does not match the input's " +
                       formatShape(x->shape) + " reduced along axis " +
                       llvm::Twine(*axis));
  if (n == 0 && outer * inner > 0)
    return kernelError(call.opType + ": cannot reduce an empty axis");
  return visitDType(x->dtype, [&](auto tag) -> llvm::Error {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      return kernelError("unsupported: " + call.opType + " with element type bool");
    } else {
      const T *px = x->as<const T>();
      int64_t *py = y->as<int64_t>();
      parallelRanges(outer * inner, x->byteSize(), [&](int64_t b, int64_t e) {
        for (int64_t c = b; c < e; ++c) {
          const T *xs = px + (c / inner) * n * inner + c % inner;
          auto best = load(xs[0]);
          int64_t at = 0;
          for (int64_t k = 1; k < n; ++k) {
            auto v = load(xs[k * inner]);
            bool better;
            if (best != best) // NaN already found: only a later NaN moves it.
              better = last && v != v;
            else if (v != v)
              better = true;
            else
              better = isMax ? (last ? v >= best : v > best)
                             : (last ? v <= best : v < best);
            if (better) {
              best = v;
              at = k;
            }
          }
          py[c] = at;
        }
      });
      return llvm::Error::success();
    }
  });
}

llvm::Error runArgMax(const KernelCall &call) {
  return runArgExtremum<true>(call);
}
llvm::Error runArgMin(const KernelCall &call) {
  return runArgExtremum<false>(call);
}

} // namespace zinc::cpu
