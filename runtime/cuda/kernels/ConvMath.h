//===- ConvMath.h - Window indexing of the conv lowerings, host and device ===//
//
// The GPU lowers Conv, ConvTranspose and their gradients as the cpu does
// (ConvLowering.h: im2col + GEMM, GEMM + col2im, im2col + GEMM against the
// gradient), with one difference: col2im *gathers*. Each image element
// sums the column entries that read it, tap by tap in ascending order, so
// no two threads write one element and no float atomics are needed; the
// result is deterministic and adds in the cpu's order.
//
// Both directions need one relation between the image and the positions:
// tap k of position p reads image element i. imageElementOf gives i from
// (k, p) for im2col; positionOf inverts it for the gather. Host tests check
// both against the cpu kernels without a GPU.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_CUDA_KERNELS_CONVMATH_H
#define ZINC_RUNTIME_CUDA_KERNELS_CONVMATH_H

#include "HostDevice.h"
#include <cstdint>

namespace zinc::cuda {

/// cpu::WindowGeometry flattened into a struct kernels take by value: up to
/// three spatial axes, image sizes `in`, position sizes `out`.
struct ConvWindow {
  int rank = 0;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, kernel[3] = {1, 1, 1};
  int64_t stride[3] = {1, 1, 1}, dilation[3] = {1, 1, 1};
  int64_t padBegin[3] = {0, 0, 0};
  /// Elements of one image plane, one position plane, one kernel.
  int64_t inPlane = 1, outPlane = 1, taps = 1;
};

/// The flat image element that tap `tap` of flat position `position`
/// reads, or -1 where it reads padding.
ZINC_HD int64_t imageElementOf(const ConvWindow &w, int64_t tap,
                               int64_t position) {
  int64_t element = 0;
  // Axes are decoded last-first; offsets are rebuilt with a running scale.
  int64_t scale = 1;
  for (int d = w.rank - 1; d >= 0; --d) {
    int64_t k = tap % w.kernel[d], o = position % w.out[d];
    tap /= w.kernel[d];
    position /= w.out[d];
    int64_t i = o * w.stride[d] - w.padBegin[d] + k * w.dilation[d];
    if (i < 0 || i >= w.in[d])
      return -1;
    element += i * scale;
    scale *= w.in[d];
  }
  return element;
}

/// The flat position whose tap `tap` reads flat image element `element`,
/// or -1 when none does (the inverse of imageElementOf for one tap: at most
/// one position per tap reads an element).
ZINC_HD int64_t positionOf(const ConvWindow &w, int64_t tap,
                           int64_t element) {
  int64_t position = 0, scale = 1;
  for (int d = w.rank - 1; d >= 0; --d) {
    int64_t k = tap % w.kernel[d], i = element % w.in[d];
    tap /= w.kernel[d];
    element /= w.in[d];
    int64_t t = i + w.padBegin[d] - k * w.dilation[d];
    if (t < 0 || t % w.stride[d] != 0)
      return -1;
    int64_t o = t / w.stride[d];
    if (o >= w.out[d])
      return -1;
    position += o * scale;
    scale *= w.out[d];
  }
  return position;
}

/// Where the column matrix of a tile keeps the entry of group `g`, batch
/// item `item` (of the tile), row `row` (channel-in-group * taps + tap) and
/// position `pos` (of the tile): the forward and the adjoint lay columns
/// out per item ([group][item][row][pos]), the weight gradient per row
/// ([group][row][item][pos]), so that one GEMM sums over the tile's items.
struct ColumnLayout {
  int64_t group = 0, item = 0, row = 0;
  ZINC_HD int64_t at(int64_t g, int64_t i, int64_t r, int64_t p) const {
    return g * group + i * item + r * row + p;
  }
};

} // namespace zinc::cuda

#endif
