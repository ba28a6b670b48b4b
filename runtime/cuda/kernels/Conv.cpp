//===- Conv.cpp - Conv, ConvTranspose and their gradients on the GPU ------===//
//
// The cuda counterparts of cpu/kernels/Conv.cpp and grad/ConvGrad.cpp: the
// same operand checks and the same geometry (the cpu's checkConvOperands
// and resolveConv(Transpose)Shape, on shape-only views of the device
// tensors), then one of ConvCores.h's three lowerings with the roles the
// cpu kernel gives each tensor.
//
//===----------------------------------------------------------------------===//
#include "ConvCores.h"
#include "ConvLowering.h"
#include "CudaKernels.h"
#include "llvm/ADT/Twine.h"
#include <optional>

using llvm::Error;

namespace zinc::cuda {

namespace {

/// Shape-only cpu views of a call's operands (data stays null: the cpu
/// helpers read dtypes and shapes only).
struct ShapeViews {
  std::optional<cpu::TensorRef> views[4];

  const cpu::TensorRef *of(size_t i) const {
    return views[i] ? &*views[i] : nullptr;
  }
  void set(size_t i, const DeviceTensor *t) {
    if (t)
      views[i] = cpu::TensorRef{t->dtype, t->shape, nullptr};
  }
};

/// The views of (a, b, c, d) in that order.
ShapeViews viewsOf(const DeviceTensor *a, const DeviceTensor *b,
                   const DeviceTensor *c, const DeviceTensor *d) {
  ShapeViews v;
  v.set(0, a);
  v.set(1, b);
  v.set(2, c);
  v.set(3, d);
  return v;
}

const void *dataOf(const DeviceTensor *t) { return t ? t->data : nullptr; }

/// Which cpu resolver fixes the geometry of an op's node.
enum class Family { Conv, ConvTranspose };

/// Checks (image-or-x, w, bias, y) as the cpu kernel would and resolves
/// the node's ConvShape; `op` names the kernel in errors.
llvm::Expected<cpu::ConvShape> resolve(const CudaKernelCall &call,
                                       llvm::StringRef op, Family family,
                                       const DeviceTensor *x,
                                       const DeviceTensor *w,
                                       const DeviceTensor *bias,
                                       const DeviceTensor *y) {
  ShapeViews v = viewsOf(x, w, bias, y);
  if (Error err = cpu::checkConvOperands(op, v.of(0), v.of(1), v.of(2), v.of(3)))
    return err;
  return family == Family::Conv
             ? cpu::resolveConvShape(op, call.attrs, *v.of(0), *v.of(1),
                                     v.of(2), *v.of(3))
             : cpu::resolveConvTransposeShape(op, call.attrs, *v.of(0),
                                              *v.of(1), v.of(2), *v.of(3));
}

} // namespace

Error runConv(const CudaKernelCall &call) {
  const DeviceTensor *x = call.input(0), *w = call.input(1), *b = call.input(2);
  DeviceTensor *y = call.output(0);
  auto cs = resolve(call, "Conv", Family::Conv, x, w, b, y);
  if (!cs)
    return cs.takeError();
  return convForwardOnGpu(call, *cs, x->dtype, x->data, w->data, dataOf(b),
                          y->data);
}

/// zinc.ConvChannels / ConvChannelsInto: a tile of a Conv split by output
/// channels, writing channels [outChannel, outChannel + M) of a wider Y.
static Error runConvChannelsOf(const CudaKernelCall &call, bool into) {
  const DeviceTensor *x = call.input(0), *w = call.input(1), *b = call.input(2);
  DeviceTensor *y = into ? call.updated(3) : call.output(0);
  if (!x || !w || !y || y->shape.size() < 3 || w->shape.empty())
    return cudaKernelError(call.opType + ": missing input or output");
  int64_t offset = call.attrs.getInt("outChannel", 0);
  int64_t channels = w->shape[0], total = y->shape[1];
  if (offset < 0 || offset + channels > total)
    return cudaKernelError(call.opType + ": channels [" + llvm::Twine(offset) +
                           ", " + llvm::Twine(offset + channels) +
                           ") are not in the output's " + llvm::Twine(total));
  DeviceTensor tile = *y;
  tile.shape[1] = channels;
  auto cs = resolve(call, "Conv", Family::Conv, x, w, b, &tile);
  if (!cs)
    return cs.takeError();
  int64_t plane = cs->geom.outputSize();
  cs->outBatchStride = total * plane;
  void *first = static_cast<char *>(y->data) +
                offset * plane * int64_t(dtypeSize(y->dtype));
  return convForwardOnGpu(call, *cs, x->dtype, x->data, w->data, dataOf(b),
                          first);
}

Error runConvChannels(const CudaKernelCall &call) {
  return runConvChannelsOf(call, false);
}

Error runConvChannelsInto(const CudaKernelCall &call) {
  return runConvChannelsOf(call, true);
}

Error runConvTranspose(const CudaKernelCall &call) {
  const DeviceTensor *x = call.input(0), *w = call.input(1), *b = call.input(2);
  DeviceTensor *y = call.output(0);
  auto cs = resolve(call, "ConvTranspose", Family::ConvTranspose, x, w, b, y);
  if (!cs)
    return cs.takeError();
  return convTransposeOnGpu(call, *cs, x->dtype, x->data, w->data, dataOf(b),
                            y->data);
}

/// zinc.ConvGradInput(dY, W) -> dX, with Conv's attributes.
Error runConvGradInput(const CudaKernelCall &call) {
  const DeviceTensor *dy = call.input(0), *w = call.input(1);
  DeviceTensor *dx = call.output(0);
  auto cs = resolve(call, "ConvGradInput", Family::Conv, dx, w, nullptr, dy);
  if (!cs)
    return cs.takeError();
  return convTransposeOnGpu(call, *cs, dy->dtype, dy->data, w->data, nullptr,
                            dx->data);
}

/// zinc.ConvGradWeight(dY, X) -> dW, with Conv's attributes.
Error runConvGradWeight(const CudaKernelCall &call) {
  const DeviceTensor *dy = call.input(0), *x = call.input(1);
  DeviceTensor *dw = call.output(0);
  auto cs = resolve(call, "ConvGradWeight", Family::Conv, x, dw, nullptr, dy);
  if (!cs)
    return cs.takeError();
  return convWeightGradOnGpu(call, *cs, x->dtype, x->data, dy->data, dw->data);
}

/// zinc.ConvTransposeGradInput(dY, W) -> dX, with ConvTranspose's
/// attributes: a Conv of dY.
Error runConvTransposeGradInput(const CudaKernelCall &call) {
  const DeviceTensor *dy = call.input(0), *w = call.input(1);
  DeviceTensor *dx = call.output(0);
  auto cs = resolve(call, "ConvTransposeGradInput", Family::ConvTranspose, dx,
                    w, nullptr, dy);
  if (!cs)
    return cs.takeError();
  return convForwardOnGpu(call, *cs, dy->dtype, dy->data, w->data, nullptr,
                          dx->data);
}

/// zinc.ConvTransposeGradWeight(dY, X) -> dW, with ConvTranspose's
/// attributes: dY is the image, X the positions.
Error runConvTransposeGradWeight(const CudaKernelCall &call) {
  const DeviceTensor *dy = call.input(0), *x = call.input(1);
  DeviceTensor *dw = call.output(0);
  auto cs = resolve(call, "ConvTransposeGradWeight", Family::ConvTranspose, x,
                    dw, nullptr, dy);
  if (!cs)
    return cs.takeError();
  return convWeightGradOnGpu(call, *cs, dy->dtype, dy->data, x->data,
                             dw->data);
}

} // namespace zinc::cuda
