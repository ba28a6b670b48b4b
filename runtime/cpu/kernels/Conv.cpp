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
