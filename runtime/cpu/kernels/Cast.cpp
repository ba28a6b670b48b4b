//===- Cast.cpp - Cast between every pair of zinc element types -----------===//
//
// The conversion rule for one element lives in Convert.h; this file only
// dispatches on the (source, destination) pair and spreads the loop over
// threads.
//
//===----------------------------------------------------------------------===//
#include "Convert.h"
#include "KernelUtil.h"
#include "Kernels.h"
#include <cstring>

namespace zinc::cpu {

/// Below this many elements thread start-up costs more than it saves.
static constexpr int64_t kCastParallelMin = int64_t(1) << 15;

template <typename To, typename From>
static void castElements(const From *src, To *dst, int64_t n) {
  parallelFor(n, n >= kCastParallelMin,
              [&](int64_t i) { dst[i] = convertValue<To>(src[i]); });
}

llvm::Error runCast(const KernelCall &call) {
  const TensorRef *x = call.input(0);
  TensorRef *y = call.output(0);
  if (!x || !y)
    return kernelError("Cast: missing input or output");
  if (x->shape != y->shape)
    return kernelError("Cast: output shape " + formatShape(y->shape) +
                       " differs from input shape " + formatShape(x->shape));
  // The `to` attribute is what shape inference gave the output; a plan whose
  // output type disagrees with it is corrupt.
  if (const Attribute *to = call.attrs.find("to")) {
    llvm::Optional<DType> want = dtypeFromOnnx(static_cast<int>(to->i));
    if (!want)
      return kernelError("unsupported: Cast to ONNX element type " +
                         llvm::Twine(to->i));
    if (*want != y->dtype)
      return kernelError("Cast: attribute to=" + dtypeName(*want) +
                         " but the output has element type " +
                         dtypeName(y->dtype));
  }
  int64_t n = x->numElements();
  if (x->dtype == y->dtype) {
    if (x->data != y->data)
      std::memcpy(y->data, x->data, x->byteSize());
    return llvm::Error::success();
  }
  visitDType(x->dtype, [&](auto fromTag) {
    using From = decltype(fromTag);
    visitDType(y->dtype, [&](auto toTag) {
      using To = decltype(toTag);
      castElements<To, From>(x->as<const From>(), y->as<To>(), n);
    });
  });
  return llvm::Error::success();
}

/// CastLike(x, like) is Cast to the element type of `like`, which shape
/// inference gave the output; like's values and shape are never read.
llvm::Error runCastLike(const KernelCall &call) {
  const TensorRef *like = call.input(1);
  const TensorRef *y = call.output(0);
  if (!like || !y)
    return kernelError("CastLike: expects inputs (input, like) and an output");
  if (like->dtype != y->dtype)
    return kernelError("CastLike: output has element type " +
                       dtypeName(y->dtype) + " but like has " +
                       dtypeName(like->dtype));
  return runCast(call);
}

} // namespace zinc::cpu
