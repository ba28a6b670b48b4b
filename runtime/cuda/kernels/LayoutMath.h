//===- LayoutMath.h - Index math of Transpose and Gather, host and device -===//
//
// A layout kernel copies elements without looking at them: each output
// element's source is a strided offset of its row-major index. The host
// builds that view (merging dimensions that stay adjacent, so a transpose of
// [B, M, N] to [B, N, M] is three dimensions whatever the rank, and widening
// elements into 16-byte units where rows allow) and the kernel only
// evaluates it; both halves live here so host tests check them on any
// machine.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_CUDA_KERNELS_LAYOUTMATH_H
#define ZINC_RUNTIME_CUDA_KERNELS_LAYOUTMATH_H

#include "HostDevice.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include <cstdint>

namespace zinc::cuda {

/// The most dimensions a kernel's view may keep after merging; 8 covers
/// every rank ONNX models use in practice, and views are passed by value.
constexpr int kMaxViewRank = 8;

/// A row-major index space `dims` read through `strides` (in units): the
/// kernels' one description of "where does element e come from".
struct StridedView {
  int rank = 0;
  int64_t dims[kMaxViewRank] = {};
  int64_t strides[kMaxViewRank] = {};
};

/// The offset of row-major index `e` of v's index space.
ZINC_HD int64_t stridedOffset(const StridedView &v, int64_t e) {
  int64_t off = 0;
  for (int d = v.rank - 1; d > 0; --d) {
    int64_t q = e / v.dims[d];
    off += (e - q * v.dims[d]) * v.strides[d];
    e = q;
  }
  return v.rank > 0 ? off + e * v.strides[0] : 0;
}

/// Transpose of `shape` by `perm` (checked by the caller) as a view of the
/// input indexed by output position: size-1 dimensions dropped, output
/// neighbours that are input neighbours merged. rank 0 or 1 with stride 1
/// means a plain copy. False when more than kMaxViewRank dimensions remain.
inline bool planTranspose(llvm::ArrayRef<int64_t> shape,
                          llvm::ArrayRef<int64_t> perm, StridedView &view) {
  llvm::SmallVector<int64_t, 8> inStrides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;)
    inStrides[d - 1] = inStrides[d] * shape[d];
  llvm::SmallVector<int64_t, 8> dims, strides;
  for (int64_t p : perm) {
    if (shape[p] == 1)
      continue;
    if (!dims.empty() && strides.back() == inStrides[p] * shape[p]) {
      dims.back() *= shape[p];
      strides.back() = inStrides[p];
      continue;
    }
    dims.push_back(shape[p]);
    strides.push_back(inStrides[p]);
  }
  if (dims.size() > static_cast<size_t>(kMaxViewRank))
    return false;
  view = StridedView();
  view.rank = static_cast<int>(dims.size());
  for (int d = 0; d < view.rank; ++d) {
    view.dims[d] = dims[d];
    view.strides[d] = strides[d];
  }
  return true;
}

/// Whether `view` is a plain copy (its output order is the input's).
ZINC_HD bool isIdentityView(const StridedView &v) {
  return v.rank == 0 || (v.rank == 1 && v.strides[0] == 1);
}

/// Whether `view` is a batch of 2-D transposes: its last two dimensions
/// [R, C] read the input's contiguous rows of R elements, C of them, i.e.
/// strides 1 and R. The tiled kernel then reads and writes whole rows.
ZINC_HD bool isBatchedTranspose(const StridedView &v) {
  return v.rank >= 2 && v.strides[v.rank - 2] == 1 &&
         v.strides[v.rank - 1] == v.dims[v.rank - 2];
}

/// The widest unit (16, 8 or 4 bytes, no narrower than `elemBytes`) that
/// moves whole elements of `view` (innermost stride 1) when every other
/// stride, the innermost row and both addresses are multiples of it, and
/// rescales the view to that unit; returns the unit's size in bytes
/// (`elemBytes` itself when nothing wider fits).
inline int widenView(StridedView &view, int elemBytes, uintptr_t src,
                     uintptr_t dst) {
  if (view.rank == 0 || view.strides[view.rank - 1] != 1)
    return elemBytes;
  for (int unit : {16, 8, 4}) {
    if (unit <= elemBytes)
      break;
    bool ok = src % unit == 0 && dst % unit == 0 &&
              (view.dims[view.rank - 1] * elemBytes) % unit == 0;
    for (int d = 0; ok && d + 1 < view.rank; ++d)
      ok = (view.strides[d] * elemBytes) % unit == 0;
    if (!ok)
      continue;
    int ratio = unit / elemBytes;
    view.dims[view.rank - 1] /= ratio;
    for (int d = 0; d + 1 < view.rank; ++d)
      view.strides[d] /= ratio;
    return unit;
  }
  return elemBytes;
}

/// Gather's index `v` wrapped into [0, dim), or -1 when out of range (the
/// kernels cannot report it without a synchronisation; they write zeros).
ZINC_HD int64_t wrapIndex(int64_t v, int64_t dim) {
  if (v < 0)
    v += dim;
  return v >= 0 && v < dim ? v : -1;
}

/// Where output element `e` of Gather's [outer, count, inner] output comes
/// from in data's [outer, dim, inner], given the wrapped index `row` of its
/// position `(e / inner) % count`.
ZINC_HD int64_t gatherSourceOffset(int64_t e, int64_t count, int64_t dim,
                                   int64_t inner, int64_t row) {
  int64_t k = e / inner, i = e - k * inner;
  int64_t o = k / count;
  return (o * dim + row) * inner + i;
}

} // namespace zinc::cuda

#endif
