//===- SliceGeometry.h - Where an ONNX Slice lands in its input -----------===//
//
// Slice and its gradient both need the region a Slice selects: this is the
// one place that applies ONNX's defaults and clamping rules to it.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_CPU_KERNELS_SLICEGEOMETRY_H
#define ZINC_RUNTIME_CPU_KERNELS_SLICEGEOMETRY_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace zinc::cpu {

/// The selected region as a strided view of the sliced tensor: its shape,
/// its element strides (negative for negative steps) and the element offset
/// of its first element.
struct SliceView {
  llvm::SmallVector<int64_t, 6> shape, strides;
  int64_t base = 0;
};

/// Applies `starts`/`ends` along `axes` (default 0..n-1) with `steps`
/// (default 1) to a tensor of `shape`. Errors (naming `op`) for lists of
/// different lengths, a repeated axis or a zero step.
llvm::Expected<SliceView> computeSliceView(llvm::StringRef op,
                                           llvm::ArrayRef<int64_t> shape,
                                           llvm::ArrayRef<int64_t> starts,
                                           llvm::ArrayRef<int64_t> ends,
                                           llvm::ArrayRef<int64_t> axes,
                                           llvm::ArrayRef<int64_t> steps);

} // namespace zinc::cpu

#endif
