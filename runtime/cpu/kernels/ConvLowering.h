//===- ConvLowering.h - im2col/col2im + GEMM cores of Conv and its gradients //
//
// Conv, ConvTranspose and the four gradient kernels (ConvGradInput,
// ConvGradWeight and the same pair for ConvTranspose) are three lowerings
// over one geometry: the forward (im2col then GEMM), the adjoint (GEMM then
// col2im) and the weight gradient (im2col then a GEMM against the gradient).
// The kernels differ only in which tensor plays which role, so the cores
// take the roles, never the op:
//
//   the *image* is the larger tensor, whose windows the kernel slides over
//   (X of Conv, Y of ConvTranspose); the *positions* are the smaller one,
//   one per window (Y of Conv, X of ConvTranspose). W is always laid out
//   [position channels, image channels / group, taps...].
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_CPU_KERNELS_CONVLOWERING_H
#define ZINC_RUNTIME_CPU_KERNELS_CONVLOWERING_H

#include "KernelUtil.h"
#include "WindowGeometry.h"
#include <type_traits>

namespace zinc::cpu {

/// The channel arithmetic of one convolution lowering.
struct ConvShape {
  int64_t batch = 0, group = 1;
  /// Channels per group of the image side and of the position side.
  int64_t imagePerGroup = 0, positionPerGroup = 0;
  /// input = the image's spatial shape, output = the positions'.
  WindowGeometry geom;
  /// Elements between batch items of Conv's output; 0: its own channels
  /// times its plane (a whole output). A tile writing its channels of a
  /// wider output (zinc.ConvChannels) sets the wider one's.
  int64_t outBatchStride = 0;
};

/// The three lowerings.
enum class ConvLowering { Forward, Transpose, WeightGrad };

/// Elements of the column tile `lowering` of `cs` works in: the `col`
/// argument of the cores below (0 when it needs none: pointwise, depthwise).
/// kernelWorkspaceBytes counts the same.
int64_t convColumnElements(const ConvShape &cs, ConvLowering lowering);

/// positions = W (*) image + bias: Conv's forward. `bias` may be null; `col`
/// holds convColumnElements(cs, Forward) elements.
template <typename C>
void convForward(const ConvShape &cs, const C *image, const C *w, const C *bias,
                 C *positions, C *col);

/// image = W^T (*) positions + bias: ConvTranspose's forward, and the input
/// gradient of Conv. `bias` may be null; `col` holds
/// convColumnElements(cs, Transpose) elements.
template <typename C>
void convTransposeForward(const ConvShape &cs, const C *positions, const C *w,
                          const C *bias, C *image, C *col);

/// dW = sum over the batch of positionGrad (*) image^T: the weight gradient
/// of Conv (image X, positions dY) and of ConvTranspose (image dY,
/// positions X). Overwrites dw; `col` holds convColumnElements(cs,
/// WeightGrad) elements.
template <typename C>
void convWeightGrad(const ConvShape &cs, const C *image, const C *positionGrad,
                    C *dw, C *col);

/// Checks dtypes (one float type for all) and the [N, C, spatial...] ranks
/// of three operands and an optional per-channel bias.
llvm::Error checkConvOperands(llvm::StringRef op, const TensorRef *a,
                              const TensorRef *w, const TensorRef *bias,
                              const TensorRef *b);

/// The shape of Conv with input `x`, weights `w` and output `y` (attributes
/// of the Conv node): groups, channels and the window geometry, checked.
/// `op` names the kernel in errors.
llvm::Expected<ConvShape>
resolveConvShape(llvm::StringRef op, const AttributeList &attrs,
                 const TensorRef &x, const TensorRef &w, const TensorRef *bias,
                 const TensorRef &y);

/// The same for ConvTranspose (output_padding, output_shape and its pads).
llvm::Expected<ConvShape>
resolveConvTransposeShape(llvm::StringRef op, const AttributeList &attrs,
                          const TensorRef &x, const TensorRef &w,
                          const TensorRef *bias, const TensorRef &y);

/// The type a GEMM runs in for storage type T.
template <typename T>
using GemmT = std::conditional_t<std::is_same_v<T, double>, double, float>;

/// `t`'s data as GemmT<T>: the buffer itself when the types agree, else a
/// widened copy in a piece of the call's workspace. Null for a null `t`.
template <typename T>
llvm::Expected<const GemmT<T> *> widen(const KernelCall &call,
                                       const TensorRef *t) {
  if (!t)
    return nullptr;
  if constexpr (std::is_same_v<T, GemmT<T>>) {
    return t->as<const T>();
  } else {
    auto keep = call.scratch<GemmT<T>>(t->numElements());
    if (!keep)
      return keep.takeError();
    const T *src = t->as<const T>();
    for (int64_t i = 0; i < t->numElements(); ++i)
      (*keep)[i] = load(src[i]);
    return *keep;
  }
}

/// Runs `body(a, b, c, out, col)` in the GEMM type of a's dtype, with `col`
/// a column tile of `columns` elements: 16-bit floats are widened to f32
/// once (a, b, c and out, in that order) and rounded once on store. Every
/// buffer comes from the call's workspace; `c` may be null.
template <typename Body>
llvm::Error dispatchConvFloat(const KernelCall &call, const TensorRef &a,
                              const TensorRef &b, const TensorRef *c,
                              TensorRef &out, int64_t columns, Body &&body) {
  return visitDType(a.dtype, [&](auto tag) -> llvm::Error {
    using T = decltype(tag);
    if constexpr (isFloatStorage<T>()) {
      using C = GemmT<T>;
      auto ap = widen<T>(call, &a);
      if (!ap)
        return ap.takeError();
      auto bp = widen<T>(call, &b);
      if (!bp)
        return bp.takeError();
      auto cp = widen<T>(call, c);
      if (!cp)
        return cp.takeError();
      if constexpr (std::is_same_v<T, C>) {
        auto col = call.scratch<C>(columns);
        if (!col)
          return col.takeError();
        body(*ap, *bp, *cp, out.as<C>(), *col);
      } else {
        auto outs = call.scratch<C>(out.numElements());
        if (!outs)
          return outs.takeError();
        auto col = call.scratch<C>(columns);
        if (!col)
          return col.takeError();
        body(*ap, *bp, *cp, *outs, *col);
        T *dst = out.as<T>();
        for (int64_t i = 0; i < out.numElements(); ++i)
          dst[i] = store<T>((*outs)[i]);
      }
    }
    return llvm::Error::success();
  });
}

} // namespace zinc::cpu

#endif
