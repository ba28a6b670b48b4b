//===- WindowGeometry.h - Window and padding arithmetic of Conv and pooling
//===//
//
// Conv, ConvTranspose, MaxPool and AveragePool share how strides, dilations,
// pads and auto_pad are read and how pads follow from them; doing it in one
// place keeps the four ops agreeing with the ONNX spec and with each other.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_CPU_KERNELS_WINDOWGEOMETRY_H
#define ZINC_RUNTIME_CPU_KERNELS_WINDOWGEOMETRY_H

#include "zinc/runtime/cpu/Kernel.h"

namespace zinc::cpu {

/// The ONNX auto_pad attribute.
enum class AutoPadKind { NotSet, SameUpper, SameLower, Valid };

/// Floor and ceiling of a / b for b > 0, for any sign of a.
inline int64_t floorDiv(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}
inline int64_t ceilDiv(int64_t a, int64_t b) { return -floorDiv(-a, b); }

/// Where the sliding windows lie along each spatial axis. Output position o
/// of axis d covers input positions start(d, o) + j * dilations[d] for j in
/// [0, kernel[d]); positions outside [0, input[d]) are padding.
struct WindowGeometry {
  llvm::SmallVector<int64_t, 3> input, output, kernel, strides, dilations,
      padBegin, padEnd;

  size_t rank() const { return input.size(); }
  int64_t effectiveKernel(size_t d) const {
    return (kernel[d] - 1) * dilations[d] + 1;
  }
  int64_t start(size_t d, int64_t o) const {
    return o * strides[d] - padBegin[d];
  }
  /// The kernel taps [first, last) of output position o along axis d that
  /// read real input (not padding); first >= last when there are none.
  void validTaps(size_t d, int64_t o, int64_t &first, int64_t &last) const {
    int64_t s = start(d, o);
    first = s < 0 ? ceilDiv(-s, dilations[d]) : 0;
    last = std::min(kernel[d], ceilDiv(input[d] - s, dilations[d]));
  }
  /// True when some output position reads no real input at all, which ceil
  /// mode or large pads can produce.
  bool hasEmptyWindow() const;
  int64_t inputSize() const;
  int64_t outputSize() const;
  int64_t kernelSize() const;
};

/// Reads the auto_pad attribute of `op`; an error for an unknown value.
llvm::Expected<AutoPadKind> readAutoPad(const AttributeList &attrs,
                                        llvm::StringRef op);

/// Reads the ints attribute `name` with one entry per spatial axis, `dflt`
/// for each when absent; an error when present with another length or with
/// an entry below `min`.
llvm::Expected<llvm::SmallVector<int64_t, 3>>
readSpatialInts(const AttributeList &attrs, llvm::StringRef op,
                llvm::StringRef name, size_t rank, int64_t dflt, int64_t min);

/// Reads `pads` ([x1_begin, x2_begin, ..., x1_end, x2_end, ...], zeros when
/// absent) into begin/end; an error for a wrong length or a negative pad.
llvm::Error readPads(const AttributeList &attrs, llvm::StringRef op,
                     size_t rank, llvm::SmallVectorImpl<int64_t> &begin,
                     llvm::SmallVectorImpl<int64_t> &end);

/// The geometry of a forward window op (Conv, MaxPool, AveragePool) over the
/// spatial dims `input` with kernel `kernel`: reads strides, dilations (only
/// when `allowDilations`), pads and auto_pad, resolves the pads as the spec
/// does, and checks that `output` (fixed by the plan) is the output size the
/// spec gives. With `ceilMode` either the floor or the ceil size is
/// accepted, since ONNX shape inference and PyTorch differ on the last
/// window.
llvm::Expected<WindowGeometry> resolveWindowGeometry(
    const AttributeList &attrs, llvm::StringRef op,
    llvm::ArrayRef<int64_t> input, llvm::ArrayRef<int64_t> output,
    llvm::ArrayRef<int64_t> kernel, bool ceilMode, bool allowDilations);

} // namespace zinc::cpu

#endif
