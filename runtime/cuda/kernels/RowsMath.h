//===- RowsMath.h - Layer norm and reduction math, host and device --------===//
//
// The formulas the LayerNormalization kernels apply per element, in the
// order the cpu kernels apply them (so f32 results differ only by how the
// row statistics were summed), and the reduction geometry: which input
// elements feed each output of a ReduceSum / ReduceMean, after the host has
// coalesced its dimensions. Host tests check both without a GPU.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_CUDA_KERNELS_ROWSMATH_H
#define ZINC_RUNTIME_CUDA_KERNELS_ROWSMATH_H

#include "HostDevice.h"
#include "LayoutMath.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include <cmath>
#include <cstdint>

namespace zinc::cuda {

//===----------------------------------------------------------------------===//
// LayerNormalization
//===----------------------------------------------------------------------===//

/// 1 / sqrt(var + epsilon) from the sum of squared deviations of a row of
/// d elements (var 0 for an empty row, as on the cpu).
ZINC_HD float layerNormInvStd(float sumSquares, int64_t d, float epsilon) {
  float var = d ? sumSquares / static_cast<float>(d) : 0.0f;
  return 1.0f / sqrtf(var + epsilon);
}

/// y = (x - mean) * invStd * scale + bias.
ZINC_HD float layerNormValue(float x, float mean, float invStd, float scale,
                             float bias) {
  return (x - mean) * invStd * scale + bias;
}

/// dx = invStd * (dy * scale - mean(g) - xhat * mean(g * xhat)), with
/// g = dy * scale and xhat = (x - mean) * invStd.
ZINC_HD float layerNormGradValue(float dy, float x, float scale, float mean,
                                 float invStd, float meanG, float meanGX) {
  float xhat = (x - mean) * invStd;
  return invStd * (dy * scale - meanG - xhat * meanGX);
}

/// Where Scale or B is read for element j of a row: j itself when it has
/// the row's shape (the common case, no division), else through its
/// broadcast strides over the normalised shape.
struct AffineIndex {
  bool direct = true;
  StridedView view;
};

ZINC_HD int64_t affineIndex(const AffineIndex &a, int64_t j) {
  return a.direct ? j : stridedOffset(a.view, j);
}

/// The reading of a Scale or B of `shape` over the normalised shape `norm`
/// that the cpu kernel allows: leading 1s beyond norm's rank dropped, the
/// rest right-aligned and each dimension 1 or norm's. `broadcast[d]` says
/// which dimensions of norm it is broadcast along (its gradient sums over
/// them). False when it does not broadcast so, or needs a view deeper than
/// kMaxViewRank.
inline bool planAffine(llvm::ArrayRef<int64_t> shape,
                       llvm::ArrayRef<int64_t> norm, AffineIndex &index,
                       llvm::SmallVectorImpl<bool> &broadcast) {
  while (!shape.empty() && shape.front() == 1 && shape.size() > norm.size())
    shape = shape.drop_front();
  if (shape.size() > norm.size())
    return false;
  size_t lead = norm.size() - shape.size();
  broadcast.assign(norm.size(), false);
  index = AffineIndex();
  bool direct = true;
  llvm::SmallVector<int64_t, 8> strides(norm.size(), 0);
  int64_t stride = 1;
  for (size_t d = norm.size(); d-- > 0;) {
    int64_t s = d >= lead ? shape[d - lead] : 1;
    if (s != norm[d] && s != 1)
      return false;
    if (s != norm[d]) {
      broadcast[d] = true;
      direct = false;
    } else {
      strides[d] = stride;
    }
    stride *= s;
  }
  if (direct)
    return true;
  if (norm.size() > static_cast<size_t>(kMaxViewRank))
    return false;
  index.direct = false;
  index.view.rank = static_cast<int>(norm.size());
  for (size_t d = 0; d < norm.size(); ++d) {
    index.view.dims[d] = norm[d];
    index.view.strides[d] = strides[d];
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

/// A reduction over a contiguous input after coalescing: dims[0, keptRank)
/// are the kept dimensions in output order, dims[keptRank, rank) the
/// reduced ones, each with its input stride. Size-1 dimensions are gone and
/// neighbours of the same kind are merged, so the common shapes are short:
/// [C] x [N] for a bias gradient, [N] x [D] for a mean over the last axis.
struct ReducePlan {
  int rank = 0;
  int keptRank = 0;
  int64_t dims[kMaxViewRank] = {};
  int64_t strides[kMaxViewRank] = {};
  int64_t outCount = 1;
  int64_t redCount = 1;
};

/// The input offset where output `o`'s reduced elements start.
ZINC_HD int64_t reduceBase(const ReducePlan &p, int64_t o) {
  int64_t off = 0;
  for (int d = p.keptRank - 1; d >= 0; --d) {
    int64_t q = o / p.dims[d];
    off += (o - q * p.dims[d]) * p.strides[d];
    o = q;
  }
  return off;
}

/// The offset, from an output's base, of its reduced element `r` (row-major
/// over the reduced dimensions).
ZINC_HD int64_t reduceOffset(const ReducePlan &p, int64_t r) {
  int64_t off = 0;
  for (int d = p.rank - 1; d >= p.keptRank; --d) {
    int64_t q = r / p.dims[d];
    off += (r - q * p.dims[d]) * p.strides[d];
    r = q;
  }
  return off;
}

/// Coalesces a contiguous `shape` reduced along `reduced`; false when more
/// than kMaxViewRank dimensions remain. Reduced dimensions of size 0 make
/// redCount 0 (a sum of nothing).
inline bool planReduce(llvm::ArrayRef<int64_t> shape,
                       llvm::ArrayRef<bool> reduced, ReducePlan &plan) {
  struct Group {
    int64_t size, stride;
    bool reduced;
  };
  llvm::SmallVector<Group, 8> groups;
  int64_t stride = 1;
  plan = ReducePlan();
  // Innermost first, so that each group's stride is its innermost one.
  for (size_t d = shape.size(); d-- > 0;) {
    if (reduced[d])
      plan.redCount *= shape[d];
    else
      plan.outCount *= shape[d];
    if (shape[d] != 1) {
      if (!groups.empty() && groups.back().reduced == reduced[d] &&
          groups.back().stride * groups.back().size == stride)
        groups.back().size *= shape[d];
      else
        groups.push_back({shape[d], stride, reduced[d]});
    }
    stride *= shape[d];
  }
  if (groups.size() > static_cast<size_t>(kMaxViewRank))
    return false;
  // Kept groups outermost first, then reduced groups outermost first.
  for (bool red : {false, true}) {
    for (size_t g = groups.size(); g-- > 0;) {
      if (groups[g].reduced != red)
        continue;
      plan.dims[plan.rank] = groups[g].size;
      plan.strides[plan.rank] = groups[g].stride;
      ++plan.rank;
    }
    if (!red)
      plan.keptRank = plan.rank;
  }
  return true;
}

/// The plan's shape as [outer, red, inner] when it reduces at most one
/// group of dimensions: the layouts with fast kernels (a mean over the last
/// axes, a bias gradient's sum over the rows). Groups of a contiguous input
/// alternate between kept and reduced, so there is then at most one kept
/// group on each side of the reduced one. False for anything else.
ZINC_HD bool reduceAsMiddle(const ReducePlan &p, int64_t &outer, int64_t &red,
                            int64_t &inner) {
  if (p.rank - p.keptRank > 1)
    return false;
  outer = 1;
  inner = 1;
  red = 1;
  if (p.rank == p.keptRank) {
    outer = p.outCount;
    return true;
  }
  red = p.dims[p.keptRank];
  for (int d = 0; d < p.keptRank; ++d) {
    if (p.strides[d] > p.strides[p.keptRank])
      outer *= p.dims[d];
    else
      inner *= p.dims[d];
  }
  return true;
}

/// Bit d set for each dimension of size > 1 that `axes` (n entries, possibly
/// negative, possibly repeated) reduce; -1 when an axis is out of range.
/// The effective reduction: reducing a size-1 dimension changes nothing.
template <typename I>
ZINC_HD int64_t effectiveAxesMask(const I *axes, int64_t n, int rank,
                                  const int64_t *dims) {
  int64_t mask = 0;
  for (int64_t i = 0; i < n; ++i) {
    int64_t a = static_cast<int64_t>(axes[i]);
    if (a < 0)
      a += rank;
    if (a < 0 || a >= rank)
      return -1;
    if (dims[a] != 1)
      mask |= int64_t(1) << a;
  }
  return mask;
}

/// The effective masks (as effectiveAxesMask) of every set of at most
/// `maxAxes` axes of `in` that reduces it to `out` under `keepdims`: the
/// readings of an axes tensor whose values only the device holds. One
/// entry in almost every graph; several where equal sizes make the shapes
/// ambiguous ([3, 3] summed to [3]). Ranks above 16 give none.
inline llvm::SmallVector<int64_t, 4>
reductionsMatching(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> out,
                   bool keepdims, int64_t maxAxes) {
  llvm::SmallVector<int64_t, 4> masks;
  int rank = static_cast<int>(in.size());
  if (rank > 16)
    return masks;
  for (int64_t set = 1; set < (int64_t(1) << rank); ++set) {
    int64_t bits = 0, mask = 0;
    llvm::SmallVector<int64_t, 8> shape;
    for (int d = 0; d < rank; ++d) {
      bool red = (set >> d) & 1;
      bits += red;
      if (red && in[d] != 1)
        mask |= int64_t(1) << d;
      if (!red)
        shape.push_back(in[d]);
      else if (keepdims)
        shape.push_back(1);
    }
    if (bits > maxAxes || llvm::ArrayRef<int64_t>(shape) != out)
      continue;
    if (!llvm::is_contained(masks, mask))
      masks.push_back(mask);
  }
  return masks;
}

} // namespace zinc::cuda

#endif
