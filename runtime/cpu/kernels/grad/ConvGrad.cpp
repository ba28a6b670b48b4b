//===- ConvGrad.cpp - Gradients of Conv and ConvTranspose (cpu kernels) ---===//
//
// Each gradient is one of the three lowerings of ConvLowering.h with the
// forward node's attributes and geometry:
//   Conv:          dX = ConvTranspose-like adjoint of dY (GEMM + col2im),
//                  dW = sum over the batch of dY * im2col(X)^T;
//   ConvTranspose: dX = a Conv of dY (im2col + GEMM),
//                  dW = sum over the batch of X * im2col(dY)^T.
// The bias gradients are ReduceSums the rule emits. The shape of the
// tensor whose gradient is computed comes from the output, so the kernels
// need no extra attribute.
//
//===----------------------------------------------------------------------===//
#include "../ConvLowering.h"
#include "../Kernels.h"

namespace zinc::cpu {

/// zinc.ConvGradInput(dY, W) -> dX, with Conv's attributes.
llvm::Error runConvGradInput(const KernelCall &call) {
  llvm::StringRef op = "ConvGradInput";
  const TensorRef *dy = call.input(0), *w = call.input(1);
  TensorRef *dx = call.output(0);
  if (llvm::Error err = checkConvOperands(op, dx, w, nullptr, dy))
    return err;
  auto cs = resolveConvShape(op, call.attrs, *dx, *w, nullptr, *dy);
  if (!cs)
    return cs.takeError();
  return dispatchConvFloat(
      call, *dy, *w, nullptr, *dx,
      convColumnElements(*cs, ConvLowering::Transpose),
      [&](auto dyp, auto wp, auto none, auto dxp, auto col) {
        convTransposeForward(*cs, dyp, wp, none, dxp, col);
      });
}

/// zinc.ConvGradWeight(dY, X) -> dW, with Conv's attributes.
llvm::Error runConvGradWeight(const KernelCall &call) {
  llvm::StringRef op = "ConvGradWeight";
  const TensorRef *dy = call.input(0), *x = call.input(1);
  TensorRef *dw = call.output(0);
  if (llvm::Error err = checkConvOperands(op, x, dw, nullptr, dy))
    return err;
  auto cs = resolveConvShape(op, call.attrs, *x, *dw, nullptr, *dy);
  if (!cs)
    return cs.takeError();
  return dispatchConvFloat(call, *x, *dy, nullptr, *dw,
                           convColumnElements(*cs, ConvLowering::WeightGrad),
                           [&](auto xp, auto dyp, auto, auto dwp, auto col) {
                             convWeightGrad(*cs, xp, dyp, dwp, col);
                           });
}

/// zinc.ConvTransposeGradInput(dY, W) -> dX, with ConvTranspose's
/// attributes.
llvm::Error runConvTransposeGradInput(const KernelCall &call) {
  llvm::StringRef op = "ConvTransposeGradInput";
  const TensorRef *dy = call.input(0), *w = call.input(1);
  TensorRef *dx = call.output(0);
  if (llvm::Error err = checkConvOperands(op, dx, w, nullptr, dy))
    return err;
  auto cs = resolveConvTransposeShape(op, call.attrs, *dx, *w, nullptr, *dy);
  if (!cs)
    return cs.takeError();
  return dispatchConvFloat(
      call, *dy, *w, nullptr, *dx,
      convColumnElements(*cs, ConvLowering::Forward),
      [&](auto dyp, auto wp, auto none, auto dxp, auto col) {
        convForward(*cs, dyp, wp, none, dxp, col);
      });
}

/// zinc.ConvTransposeGradWeight(dY, X) -> dW, with ConvTranspose's
/// attributes.
llvm::Error runConvTransposeGradWeight(const KernelCall &call) {
  llvm::StringRef op = "ConvTransposeGradWeight";
  const TensorRef *dy = call.input(0), *x = call.input(1);
  TensorRef *dw = call.output(0);
  if (llvm::Error err = checkConvOperands(op, x, dw, nullptr, dy))
    return err;
  auto cs = resolveConvTransposeShape(op, call.attrs, *x, *dw, nullptr, *dy);
  if (!cs)
    return cs.takeError();
  return dispatchConvFloat(call, *dy, *x, nullptr, *dw,
                           convColumnElements(*cs, ConvLowering::WeightGrad),
                           [&](auto dyp, auto xp, auto, auto dwp, auto col) {
                             convWeightGrad(*cs, dyp, xp, dwp, col);
                           });
}

} // namespace zinc::cpu
