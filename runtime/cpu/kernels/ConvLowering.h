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
#include <vector>

namespace zinc::cpu {

/// The channel arithmetic of one convolution lowering.
struct ConvShape {
  int64_t batch = 0, group = 1;
  /// Channels per group of the image side and of the position side.
  int64_t imagePerGroup = 0, positionPerGroup = 0;
  /// input = the image's spatial shape, output = the positions'.
  WindowGeometry geom;
};

/// positions = W (*) image + bias: Conv's forward. `bias` may be null.
template <typename C>
void convForward(const ConvShape &cs, const C *image, const C *w, const C *bias,
                 C *positions);

/// image = W^T (*) positions + bias: ConvTranspose's forward, and the input
/// gradient of Conv. `bias` may be null.
template <typename C>
void convTransposeForward(const ConvShape &cs, const C *positions, const C *w,
                          const C *bias, C *image);

/// dW = sum over the batch of positionGrad (*) image^T: the weight gradient
/// of Conv (image X, positions dY) and of ConvTranspose (image dY,
/// positions X). Overwrites dw.
template <typename C>
void convWeightGrad(const ConvShape &cs, const C *image, const C *positionGrad,
                    C *dw);

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
/// widened copy kept in `keep`.
template <typename T>
const GemmT<T> *widen(const TensorRef *t, std::vector<GemmT<T>> &keep) {
  if (!t)
    return nullptr;
  if constexpr (std::is_same_v<T, GemmT<T>>) {
    return t->as<const T>();
  } else {
    const T *src = t->as<const T>();
    keep.resize(t->numElements());
    for (size_t i = 0; i < keep.size(); ++i)
      keep[i] = load(src[i]);
    return keep.data();
  }
}

/// Runs `body(a, b, c, out)` in the GEMM type of a's dtype: 16-bit floats
/// are widened to f32 once and rounded once on store. `c` may be null.
template <typename Body>
void dispatchConvFloat(const TensorRef &a, const TensorRef &b,
                       const TensorRef *c, TensorRef &out, Body &&body) {
  visitDType(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (isFloatStorage<T>()) {
      using C = GemmT<T>;
      std::vector<C> as, bs, cs;
      const C *ap = widen<T>(&a, as), *bp = widen<T>(&b, bs),
              *cp = widen<T>(c, cs);
      if constexpr (std::is_same_v<T, C>) {
        body(ap, bp, cp, out.as<C>());
      } else {
        std::vector<C> outs(out.numElements());
        body(ap, bp, cp, outs.data());
        T *dst = out.as<T>();
        for (size_t i = 0; i < outs.size(); ++i)
          dst[i] = store<T>(outs[i]);
      }
    }
  });
}

} // namespace zinc::cpu

#endif
