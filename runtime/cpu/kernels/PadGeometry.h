//===- PadGeometry.h - Where each element of a padded tensor comes from ---===//
//
// Pad and its gradient share one mapping from an output index to the input
// index it reads (or none, for constant padding), per dimension.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_CPU_KERNELS_PADGEOMETRY_H
#define ZINC_RUNTIME_CPU_KERNELS_PADGEOMETRY_H

#include "zinc/runtime/cpu/Kernel.h"
#include "llvm/ADT/SmallVector.h"

namespace zinc::cpu {

enum class PadModeKind { Constant, Reflect, Edge, Wrap };

struct PadGeometry {
  PadModeKind mode = PadModeKind::Constant;
  /// Elements added before each dimension of the input (negative: removed).
  llvm::SmallVector<int64_t, 6> before;
  llvm::SmallVector<int64_t, 6> inShape, outShape;
};

/// Reads Pad's mode attribute and its pads (operand `padsInput`, or the
/// `pads` attribute before opset 11), with the optional axes operand of
/// opset 18 (`axesInput`), against an input of `inShape`, and checks that
/// the padded shape is `outShape`. Reflect needs pads below each
/// dimension's size, edge and wrap a non-empty dimension.
llvm::Expected<PadGeometry> padGeometry(const KernelCall &call,
                                        llvm::ArrayRef<int64_t> inShape,
                                        llvm::ArrayRef<int64_t> outShape,
                                        size_t padsInput, size_t axesInput);

/// The input index that output index `o` of dimension `d` reads, or -1 when
/// it reads the constant.
int64_t padSource(const PadGeometry &g, size_t d, int64_t o);

} // namespace zinc::cpu

#endif
