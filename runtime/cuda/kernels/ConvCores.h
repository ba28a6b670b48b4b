//===- ConvCores.h - The GPU's im2col/col2im + cuBLASLt conv cores --------===//
//
// The cuda counterparts of cpu/kernels/ConvLowering.h's three cores, with
// the same roles (the *image* is the tensor the windows slide over, the
// *positions* the one with an entry per window; W is [position channels,
// image channels / group, taps...]) and the same ConvShape, resolved on the
// host by the cpu's own resolveConvShape / resolveConvTransposeShape.
//
// Columns live in the call's scratch. A tile covers as many whole batch
// items as fit, so that one strided-batched GEMM (or, for the weight
// gradient, one GEMM summing over the items) does a tile's work; when not
// even one item's columns fit, it covers whole lines of one item's
// positions instead, and a run of positions when not even a line fits.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_CUDA_KERNELS_CONVCORES_H
#define ZINC_RUNTIME_CUDA_KERNELS_CONVCORES_H

#include "ConvMath.h"
#include "zinc/runtime/cuda/CudaKernel.h"

namespace zinc::cpu {
struct ConvShape;
struct WindowGeometry;
} // namespace zinc::cpu

namespace zinc::cuda {

/// `g` as kernels take it; an error past three spatial axes.
llvm::Expected<ConvWindow> convWindowOf(const cpu::WindowGeometry &g,
                                        llvm::StringRef op);

/// How much of a conv one tile covers: `items` whole batch items, or (with
/// items == 1) `positions` of one item's, whole lines where they fit.
struct ConvTiling {
  int64_t items = 1, positions = 0;
};

/// The tiling of `batch` items of `positions` positions each (lines of
/// `lineLength`) when a tile needs `perPosition` scratch elements per item
/// and position and `budget` are free: whole items, else whole lines of
/// one item, else (a line longer than the scratch) any run of positions;
/// an error naming the sizes when not even one position fits.
llvm::Expected<ConvTiling> planConvTiles(llvm::StringRef op, int64_t batch,
                                         int64_t positions, int64_t lineLength,
                                         int64_t perPosition, int64_t budget);

/// positions = W (*) image + bias (Conv's forward): `bias` may be null.
llvm::Error convForwardOnGpu(const CudaKernelCall &call,
                             const cpu::ConvShape &cs, DType dtype,
                             const void *image, const void *w,
                             const void *bias, void *positions);

/// image = W^T (*) positions + bias (ConvTranspose's forward, Conv's input
/// gradient): `bias` may be null.
llvm::Error convTransposeOnGpu(const CudaKernelCall &call,
                               const cpu::ConvShape &cs, DType dtype,
                               const void *positions, const void *w,
                               const void *bias, void *image);

/// dW = sum over the batch of positionGrad (*) image^T; overwrites dw.
llvm::Error convWeightGradOnGpu(const CudaKernelCall &call,
                                const cpu::ConvShape &cs, DType dtype,
                                const void *image, const void *positionGrad,
                                void *dw);

} // namespace zinc::cuda

#endif
