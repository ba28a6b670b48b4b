//===- Conv.cpp - Conv and ConvTranspose cpu kernels (im2col + BLAS GEMM) -===//
//
// Conv lowers each (batch item, group) to one GEMM: W[Mg, Cg*K] times the
// im2col matrix [Cg*K, output positions]. ConvTranspose is the adjoint: the
// GEMM W^T[Mg*K, Cg] times X gives columns that col2im adds into Y. Both use
// one WindowGeometry in which the "image" is the larger tensor (X of Conv, Y
// of ConvTranspose) and the "positions" the smaller one, so im2col and
// col2im share their index arithmetic; the cores live in ConvLowering.cpp,
// shared with the gradient kernels (grad/ConvGrad.cpp).
//
//===----------------------------------------------------------------------===//
#include "ConvLowering.h"
#include "Convert.h"
#include "Kernels.h"

namespace zinc::cpu {

llvm::Error runConv(const KernelCall &call) {
  const TensorRef *x = call.input(0), *w = call.input(1), *bias = call.input(2);
  TensorRef *y = call.output(0);
  if (llvm::Error err = checkConvOperands("Conv", x, w, bias, y))
    return err;
  auto cs = resolveConvShape("Conv", call.attrs, *x, *w, bias, *y);
  if (!cs)
    return cs.takeError();
  return dispatchConvFloat(call, *x, *w, bias, *y,
                           convColumnElements(*cs, ConvLowering::Forward),
                           [&](auto xp, auto wp, auto bp, auto yp, auto col) {
                             convForward(*cs, xp, wp, bp, yp, col);
                           });
}

/// zinc.ConvChannels(X, W, B) -> Y and zinc.ConvChannelsInto(X, W, B, Y):
/// a tile of a Conv split by output channels (the tile pass), writing its
/// channels [outChannel, outChannel + M) of the wider Y in place
/// (concat-in-place). The GEMMs write Y's planes directly; 16-bit floats go
/// through a widened tile that is rounded into Y's planes.
static llvm::Error runConvChannelsOf(const KernelCall &call, bool into) {
  const TensorRef *x = call.input(0), *w = call.input(1), *bias = call.input(2);
  TensorRef *y = into ? call.updated(3) : call.output(0);
  if (!x || !w || !y || y->rank() < 3 || w->rank() < 1)
    return kernelError(call.opType + ": missing input or output");
  int64_t offset = call.attrs.getInt("outChannel", 0);
  int64_t channels = w->shape[0], total = y->shape[1];
  if (offset < 0 || offset + channels > total)
    return kernelError(call.opType + ": channels [" + llvm::Twine(offset) + ", " +
                       llvm::Twine(offset + channels) + ") are not in the output's " +
                       llvm::Twine(total));
  // The tile's own output, for the checks and the geometry.
  TensorRef tile = *y;
  tile.shape[1] = channels;
  if (llvm::Error err = checkConvOperands("Conv", x, w, bias, &tile))
    return err;
  auto cs = resolveConvShape("Conv", call.attrs, *x, *w, bias, tile);
  if (!cs)
    return cs.takeError();
  int64_t plane = cs->geom.outputSize();
  int64_t columns = convColumnElements(*cs, ConvLowering::Forward);
  return visitDType(x->dtype, [&](auto tag) -> llvm::Error {
    using T = decltype(tag);
    if constexpr (isFloatStorage<T>()) {
      using C = GemmT<T>;
      auto xp = widen<T>(call, x);
      if (!xp)
        return xp.takeError();
      auto wp = widen<T>(call, w);
      if (!wp)
        return wp.takeError();
      auto bp = widen<T>(call, bias);
      if (!bp)
        return bp.takeError();
      if constexpr (std::is_same_v<T, C>) {
        auto col = call.scratch<C>(columns);
        if (!col)
          return col.takeError();
        ConvShape strided = *cs;
        strided.outBatchStride = total * plane;
        convForward(strided, *xp, *wp, *bp, y->as<C>() + offset * plane, *col);
      } else {
        auto out = call.scratch<C>(tile.numElements());
        if (!out)
          return out.takeError();
        auto col = call.scratch<C>(columns);
        if (!col)
          return col.takeError();
        convForward(*cs, *xp, *wp, *bp, *out, *col);
        T *dst = y->as<T>();
        int64_t perItem = channels * plane;
        for (int64_t n = 0; n < cs->batch; ++n)
          for (int64_t i = 0; i < perItem; ++i)
            dst[(n * total + offset) * plane + i] = store<T>((*out)[n * perItem + i]);
      }
    }
    return llvm::Error::success();
  });
}

llvm::Error runConvChannels(const KernelCall &call) { return runConvChannelsOf(call, false); }

llvm::Error runConvChannelsInto(const KernelCall &call) {
  return runConvChannelsOf(call, true);
}

llvm::Error runConvTranspose(const KernelCall &call) {
  const TensorRef *x = call.input(0), *w = call.input(1), *bias = call.input(2);
  TensorRef *y = call.output(0);
  if (llvm::Error err = checkConvOperands("ConvTranspose", x, w, bias, y))
    return err;
  auto cs =
      resolveConvTransposeShape("ConvTranspose", call.attrs, *x, *w, bias, *y);
  if (!cs)
    return cs.takeError();
  return dispatchConvFloat(call, *x, *w, bias, *y,
                           convColumnElements(*cs, ConvLowering::Transpose),
                           [&](auto xp, auto wp, auto bp, auto yp, auto col) {
                             convTransposeForward(*cs, xp, wp, bp, yp, col);
                           });
}

} // namespace zinc::cpu
