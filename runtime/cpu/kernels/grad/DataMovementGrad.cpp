//===- DataMovementGrad.cpp - Scatter kernels of Slice, Gather, ReduceMax -===//
//
// The backward of an op that picks elements puts the gradient back where
// they came from, into zeros: SliceGrad writes dy into the sliced view of
// dx, GatherGrad adds dy's rows into the gathered rows of dx (repeated
// indices add up), ReduceMaxGrad gives dy to the elements equal to the max,
// split equally among ties. All zero dx first; all-zero bytes are the zero
// of every float type.
//
//===----------------------------------------------------------------------===//
#include "../KernelUtil.h"
#include "../Kernels.h"
#include "../SliceGeometry.h"
#include "llvm/ADT/Twine.h"
#include <algorithm>
#include <cstring>
#include <numeric>

using llvm::ArrayRef;
using llvm::Error;
using llvm::SmallVector;
using llvm::Twine;

namespace zinc::cpu {

using Dims = SmallVector<int64_t, 6>;

/// Elements of the row-block accumulator of GatherGrad: one cache line of
/// doubles per 8, kept on the stack.
static constexpr int64_t kAccBlock = 64;

static Error requireFloat(const KernelCall &call, const TensorRef &t) {
  if (isFloatDType(t.dtype))
    return Error::success();
  return kernelError("unsupported: " + call.opType + " with element type " +
                     dtypeName(t.dtype));
}

static Error requireSameType(const KernelCall &call, const TensorRef &a,
                             const TensorRef &b) {
  if (a.dtype == b.dtype)
    return Error::success();
  return kernelError(call.opType + ": element types " + dtypeName(a.dtype) +
                     " and " + dtypeName(b.dtype) + " differ");
}

static Error requireShape(const KernelCall &call, const char *what,
                          const TensorRef &t, ArrayRef<int64_t> expected) {
  if (ArrayRef<int64_t>(t.shape) == expected)
    return Error::success();
  return kernelError(call.opType + ": " + what + " has shape " +
                     formatShape(t.shape) + ", expected " +
                     formatShape(expected));
}

/// Zeroes `t`, spread over threads when it is large.
static void zeroTensor(TensorRef &t) {
  char *p = static_cast<char *>(t.data);
  size_t bytes = t.byteSize();
  constexpr size_t chunk = size_t(1) << 16;
  int64_t chunks = static_cast<int64_t>((bytes + chunk - 1) / chunk);
  parallelRanges(chunks, bytes, [&](int64_t b, int64_t e) {
    size_t from = static_cast<size_t>(b) * chunk;
    size_t to = std::min(bytes, static_cast<size_t>(e) * chunk);
    std::memset(p + from, 0, to - from);
  });
}

//===----------------------------------------------------------------------===//
// SliceGrad(dy, starts, ends, axes?, steps?) -> dx, attribute shape
//===----------------------------------------------------------------------===//

static llvm::Expected<SliceView> sliceView(const KernelCall &call,
                                           ArrayRef<int64_t> shape) {
  auto list = [&](size_t i) {
    const TensorRef *t = call.input(i);
    return t ? loadIndexList(*t) : Dims();
  };
  Dims starts = list(1), ends = list(2), axes = list(3), steps = list(4);
  return computeSliceView(call.opType, shape, starts, ends, axes, steps);
}

/// Writes the contiguous `src` into the view of `dst` with the given shape
/// and element strides, one row of the last dimension at a time.
template <typename T>
static void scatterView(const TensorRef &src, T *dst, ArrayRef<int64_t> shape,
                        ArrayRef<int64_t> strides) {
  const T *in0 = src.as<T>();
  if (shape.empty()) {
    dst[0] = in0[0];
    return;
  }
  int64_t rank = static_cast<int64_t>(shape.size());
  int64_t cols = shape.back(), colStride = strides.back();
  int64_t rows = src.numElements() / cols;
  parallelRanges(rows, src.byteSize() * 2, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      int64_t off = 0;
      for (int64_t d = rank - 1, rest = r; d-- > 0;) {
        off += (rest % shape[d]) * strides[d];
        rest /= shape[d];
      }
      const T *in = in0 + r * cols;
      T *out = dst + off;
      if (colStride == 1)
        std::memcpy(out, in, cols * sizeof(T));
      else
        for (int64_t j = 0; j < cols; ++j)
          out[j * colStride] = in[j];
    }
  });
}

Error runSliceGrad(const KernelCall &call) {
  const TensorRef *dy = call.input(0);
  TensorRef *dx = call.output(0);
  if (!dy || !call.input(1) || !call.input(2) || !dx)
    return kernelError("SliceGrad: expects inputs (dy, starts, ends) and "
                       "output dx");
  if (Error e = requireFloat(call, *dy))
    return e;
  if (Error e = requireSameType(call, *dy, *dx))
    return e;
  if (Error e = requireShape(call, "dx", *dx, call.attrs.getInts("shape")))
    return e;
  auto view = sliceView(call, dx->shape);
  if (!view)
    return view.takeError();
  if (Error e = requireShape(call, "dy", *dy, view->shape))
    return e;
  zeroTensor(*dx);
  if (dy->numElements() == 0)
    return Error::success();
  visitDType(dy->dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (isFloatStorage<T>())
      scatterView(*dy, dx->as<T>() + view->base, view->shape, view->strides);
  });
  return Error::success();
}

//===----------------------------------------------------------------------===//
// GatherGrad(indices, dy) -> dx, attributes axis, shape
//===----------------------------------------------------------------------===//

/// dst[o, idx[order[j]], :] = sum over j in a run of src[o, order[j], :],
/// for every run of equal indices and every outer index o.
template <typename T>
static void gatherAdd(const T *src, T *dst, ArrayRef<int64_t> idx,
                      ArrayRef<int64_t> order, ArrayRef<int64_t> runs,
                      int64_t outer, int64_t dim, int64_t inner,
                      size_t workBytes) {
  int64_t count = static_cast<int64_t>(order.size());
  int64_t numRuns = static_cast<int64_t>(runs.size()) - 1;
  parallelRanges(outer * numRuns, workBytes, [&](int64_t begin, int64_t end) {
    double acc[kAccBlock];
    for (int64_t u = begin; u < end; ++u) {
      int64_t o = u / numRuns, run = u % numRuns;
      T *row = dst + (o * dim + idx[order[runs[run]]]) * inner;
      for (int64_t i0 = 0; i0 < inner; i0 += kAccBlock) {
        int64_t len = std::min(kAccBlock, inner - i0);
        std::fill_n(acc, len, 0.0);
        for (int64_t j = runs[run]; j < runs[run + 1]; ++j) {
          const T *in = src + (o * count + order[j]) * inner + i0;
          for (int64_t i = 0; i < len; ++i)
            acc[i] += static_cast<double>(load(in[i]));
        }
        for (int64_t i = 0; i < len; ++i)
          row[i0 + i] = store<T>(acc[i]);
      }
    }
  });
}

/// Sorting the positions by index turns the scatter-add into one write per
/// gathered row: rows are independent (threads need no atomics), each sum
/// is accumulated in double in a fixed order (the result does not depend on
/// the thread count), and 16-bit floats are rounded once.
Error runGatherGrad(const KernelCall &call) {
  const TensorRef *indices = call.input(0), *dy = call.input(1);
  TensorRef *dx = call.output(0);
  if (!indices || !dy || !dx)
    return kernelError(
        "GatherGrad: expects inputs (indices, dy) and output dx");
  if (Error e = requireFloat(call, *dy))
    return e;
  if (Error e = requireSameType(call, *dy, *dx))
    return e;
  if (!isIntegerDType(indices->dtype))
    return kernelError(Twine("GatherGrad: indices have element type ") +
                       dtypeName(indices->dtype) + ", expected an integer");
  if (Error e = requireShape(call, "dx", *dx, call.attrs.getInts("shape")))
    return e;
  if (dx->rank() == 0)
    return kernelError("GatherGrad: data must have rank >= 1");
  auto axisOr = normalizeAxis(call.attrs.getInt("axis", 0), dx->rank());
  if (!axisOr)
    return axisOr.takeError();
  int64_t axis = *axisOr;
  ArrayRef<int64_t> dataShape = dx->shape;
  Dims expected(dataShape.begin(), dataShape.begin() + axis);
  expected.append(indices->shape.begin(), indices->shape.end());
  expected.append(dataShape.begin() + axis + 1, dataShape.end());
  if (Error e = requireShape(call, "dy", *dy, expected))
    return e;

  // The indices, their positions sorted by index and the start of each run
  // of one index (count + 1 entries at most), in the call's workspace.
  int64_t dim = dataShape[axis];
  int64_t count = indices->numElements();
  auto idxOr = call.scratch<int64_t>(count);
  if (!idxOr)
    return idxOr.takeError();
  auto orderOr = call.scratch<int64_t>(count);
  if (!orderOr)
    return orderOr.takeError();
  auto runsOr = call.scratch<int64_t>(count + 1);
  if (!runsOr)
    return runsOr.takeError();
  int64_t *idx = *idxOr, *order = *orderOr, *runStarts = *runsOr;
  for (int64_t i = 0; i < count; ++i) {
    idx[i] = loadIndex(*indices, i);
    if (idx[i] < -dim || idx[i] >= dim)
      return kernelError("GatherGrad: index " + Twine(idx[i]) +
                         " at position " + Twine(i) +
                         " is out of range for axis " + Twine(axis) +
                         " of size " + Twine(dim));
    if (idx[i] < 0)
      idx[i] += dim;
  }
  // Positions by index, ties in position order: what a stable sort gives,
  // without the buffer std::stable_sort would allocate.
  std::iota(order, order + count, 0);
  std::sort(order, order + count, [&](int64_t a, int64_t b) {
    return idx[a] != idx[b] ? idx[a] < idx[b] : a < b;
  });
  // runs[r]..runs[r+1] are the positions (in `order`) of one index.
  int64_t numRuns = 0;
  for (int64_t j = 0; j < count; ++j)
    if (j == 0 || idx[order[j]] != idx[order[j - 1]])
      runStarts[numRuns++] = j;
  runStarts[numRuns] = count;
  ArrayRef<int64_t> runs(runStarts, numRuns + 1);

  zeroTensor(*dx);
  int64_t outer = numElements(dataShape.take_front(axis));
  int64_t inner = numElements(dataShape.drop_front(axis + 1));
  if (inner == 0)
    return Error::success();
  visitDType(dy->dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (isFloatStorage<T>())
      gatherAdd(dy->as<T>(), dx->as<T>(), ArrayRef<int64_t>(idx, count),
                ArrayRef<int64_t>(order, count), runs, outer, dim, inner,
                dy->byteSize() + dx->byteSize());
  });
  return Error::success();
}

//===----------------------------------------------------------------------===//
// ReduceMaxGrad(x, y, dy) -> dx; y and dy keep the reduced axes as size 1
//===----------------------------------------------------------------------===//

Error runReduceMaxGrad(const KernelCall &call) {
  const TensorRef *x = call.input(0), *y = call.input(1), *dy = call.input(2);
  TensorRef *dx = call.output(0);
  if (!x || !y || !dy || !dx)
    return kernelError(
        "ReduceMaxGrad: expects inputs (x, y, dy) and output dx");
  if (Error e = requireFloat(call, *x))
    return e;
  for (const TensorRef *t : {y, dy, static_cast<const TensorRef *>(dx)})
    if (Error e = requireSameType(call, *x, *t))
      return e;
  if (Error e = requireShape(call, "dx", *dx, x->shape))
    return e;
  if (Error e = requireShape(call, "dy", *dy, y->shape))
    return e;
  bool kept = y->rank() == x->rank();
  for (int64_t d = 0; kept && d < x->rank(); ++d)
    kept = y->shape[d] == x->shape[d] || y->shape[d] == 1;
  if (!kept)
    return kernelError("ReduceMaxGrad: y has shape " + formatShape(y->shape) +
                       ", not x's " + formatShape(x->shape) +
                       " with reduced axes of size 1");
  Dims xs = contiguousStrides(x->shape);
  Dims ys = broadcastStrides(y->shape, x->shape);
  auto tiesOr = call.scratch<int64_t>(y->numElements());
  if (!tiesOr)
    return tiesOr.takeError();
  int64_t *ties = *tiesOr;
  std::fill(ties, ties + y->numElements(), int64_t(0));
  visitDType(x->dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (isFloatStorage<T>()) {
      using C = ComputeT<T>;
      const T *px = x->as<T>(), *py = y->as<T>(), *pg = dy->as<T>();
      T *po = dx->as<T>();
      std::array<ArrayRef<int64_t>, 2> strides{xs, ys};
      forEachStrided<2>(x->shape, strides,
                        [&](const std::array<int64_t, 2> &off) {
                          if (load(px[off[0]]) == load(py[off[1]]))
                            ++ties[off[1]];
                        });
      forEachStrided<2>(
          x->shape, strides, [&](const std::array<int64_t, 2> &off) {
            C g = load(px[off[0]]) == load(py[off[1]])
                      ? load(pg[off[1]]) / static_cast<C>(ties[off[1]])
                      : C(0);
            po[off[0]] = store<T>(g);
          });
    }
  });
  return Error::success();
}

} // namespace zinc::cpu
