//===- PaddingGrad.cpp - Backward kernel of Pad ---------------------------===//
//
// PadGrad(dy, pads, axes?) {mode, shape}: each element of dy is added to the
// input element the forward Pad read it from (PadGeometry's mapping), so
// edge and reflect padding send several output gradients to one input;
// constant padding's border reads no input and gives nothing. Serial over
// rows, since reflected rows add into the same input rows.
//
//===----------------------------------------------------------------------===//
#include "../KernelUtil.h"
#include "../Kernels.h"
#include "../PadGeometry.h"
#include "llvm/ADT/Twine.h"
#include <cstring>

namespace zinc::cpu {

llvm::Error runPadGrad(const KernelCall &call) {
  const TensorRef *dy = call.input(0), *pads = call.input(1);
  TensorRef *dx = call.output(0);
  if (!dy || !pads || !dx)
    return kernelError("PadGrad: expects dy, pads and an output");
  if (dy->dtype != dx->dtype || !isFloatDType(dx->dtype))
    return kernelError("PadGrad: dy and dx must share a float type");
  llvm::ArrayRef<int64_t> shape = call.attrs.getInts("shape");
  if (llvm::ArrayRef<int64_t>(dx->shape) != shape)
    return kernelError("PadGrad: output shape " + formatShape(dx->shape) +
                       " is not the forward input's " + formatShape(shape));
  llvm::Expected<PadGeometry> g =
      padGeometry(call, dx->shape, dy->shape, 1, 2);
  if (!g)
    return g.takeError();
  std::memset(dx->data, 0, dx->byteSize());
  if (dy->numElements() == 0 || dx->numElements() == 0)
    return llvm::Error::success();
  size_t rank = dy->shape.size();
  if (rank == 0) {
    copyBytes(dx->data, dy->data, dy->byteSize());
    return llvm::Error::success();
  }
  int64_t outRow = dy->shape[rank - 1], inRow = dx->shape[rank - 1];
  int64_t rows = dy->numElements() / outRow;
  visitDType(dx->dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (isFloatStorage<T>()) {
      const T *pdy = dy->as<const T>();
      T *pdx = dx->as<T>();
      for (int64_t r = 0; r < rows; ++r) {
        int64_t rest = r, src = 0, stride = 1;
        bool none = false;
        for (size_t d = rank - 1; d-- > 0;) {
          int64_t i = padSource(*g, d, rest % dy->shape[d]);
          rest /= dy->shape[d];
          none |= i < 0;
          src += i * stride;
          stride *= dx->shape[d];
        }
        if (none)
          continue;
        const T *in = pdy + r * outRow;
        T *acc = pdx + src * inRow;
        for (int64_t j = 0; j < outRow; ++j) {
          int64_t i = padSource(*g, rank - 1, j);
          if (i >= 0)
            acc[i] = store<T>(load(acc[i]) + load(in[j]));
        }
      }
    }
  });
  return llvm::Error::success();
}

} // namespace zinc::cpu
