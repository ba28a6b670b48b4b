//===- DataMovement.cpp - cpu kernels that move elements without math -----===//
//
// Transpose, Slice and Expand are all a strided view of their input copied
// into a contiguous output, so they share one copy routine (copyView).
// Gather, Concat and Split move contiguous blocks with memcpy; Trilu copies
// or zeroes row segments. None of them looks at values, so everything works
// on elements of dtypeSize() bytes and is instantiated once per size, not
// per dtype.
//
//===----------------------------------------------------------------------===//
#include "KernelUtil.h"
#include "SliceGeometry.h"
#include "Kernels.h"
#include "llvm/ADT/Twine.h"
#include <algorithm>
#include <cstring>
#include <limits>

using llvm::ArrayRef;
using llvm::Error;
using llvm::SmallVector;
using llvm::StringRef;
using llvm::Twine;

namespace zinc::cpu {

using Dims = SmallVector<int64_t, 6>;

static Error requireIO(const KernelCall &call, size_t numInputs) {
  for (size_t i = 0; i < numInputs; ++i)
    if (!call.input(i))
      return kernelError(call.opType + ": input " + Twine(i) + " is missing");
  if (!call.output(0))
    return kernelError(call.opType + ": output 0 is missing");
  if (call.input(0)->dtype != call.output(0)->dtype)
    return kernelError(
        call.opType + ": input has type " + dtypeName(call.input(0)->dtype) +
        " but output has type " + dtypeName(call.output(0)->dtype));
  return Error::success();
}

static Error checkOutputShape(const KernelCall &call, const TensorRef &out,
                              ArrayRef<int64_t> expected) {
  if (ArrayRef<int64_t>(out.shape) == expected)
    return Error::success();
  return kernelError(call.opType + ": output shape " + formatShape(out.shape) +
                     " differs from the expected " + formatShape(expected));
}

//===----------------------------------------------------------------------===//
// Strided views
//===----------------------------------------------------------------------===//

/// Drops size-1 dimensions and merges neighbours that the source walks as
/// one (outer stride == inner stride * inner size), so that most views end
/// up as a few long rows.
static void simplifyView(Dims &shape, Dims &strides) {
  Dims s, t;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1)
      continue;
    if (!s.empty() && t.back() == strides[d] * shape[d]) {
      s.back() *= shape[d];
      t.back() = strides[d];
      continue;
    }
    s.push_back(shape[d]);
    t.push_back(strides[d]);
  }
  shape = std::move(s);
  strides = std::move(t);
}

/// A row-major walk over `shape` that keeps the source offset of the
/// current index; starts anywhere, so each thread can take a range.
struct Odometer {
  ArrayRef<int64_t> shape, strides;
  Dims idx;
  int64_t offset = 0;

  Odometer(ArrayRef<int64_t> shape, ArrayRef<int64_t> strides, int64_t start)
      : shape(shape), strides(strides), idx(shape.size(), 0) {
    for (size_t d = shape.size(); d-- > 0;) {
      idx[d] = start % shape[d];
      start /= shape[d];
      offset += idx[d] * strides[d];
    }
  }
  void next() {
    for (size_t d = shape.size(); d-- > 0;) {
      if (++idx[d] < shape[d]) {
        offset += strides[d];
        return;
      }
      offset -= strides[d] * (shape[d] - 1);
      idx[d] = 0;
    }
  }
};

template <typename E>
static void copyViewTyped(E *dst, const E *src, ArrayRef<int64_t> shape,
                          ArrayRef<int64_t> strides) {
  size_t rank = shape.size();
  if (rank == 0) {
    dst[0] = src[0];
    return;
  }
  int64_t total = numElements(shape);
  size_t bytes = static_cast<size_t>(total) * sizeof(E) * 2;
  int64_t cols = shape[rank - 1], colStride = strides[rank - 1];

  // The source is contiguous down the output's columns (a transpose of the
  // last two dimensions): copy in square tiles of at most 32 KiB so that the
  // strided side stays in L1. Row-major inside a tile measured fastest.
  if (rank >= 2 && colStride != 1 && colStride != 0 && strides[rank - 2] == 1 &&
      shape[rank - 2] >= 8 && cols >= 8) {
    constexpr int64_t tile = sizeof(E) >= 8 ? 32 : 64;
    int64_t rows = shape[rank - 2];
    int64_t matrices = total / (rows * cols);
    ArrayRef<int64_t> batchShape = shape.drop_back(2);
    ArrayRef<int64_t> batchStrides = strides.drop_back(2);
    parallelRanges(matrices, bytes, [&](int64_t begin, int64_t end) {
      Odometer batch(batchShape, batchStrides, begin);
      for (int64_t m = begin; m < end; ++m, batch.next()) {
        E *out = dst + m * rows * cols;
        const E *in = src + batch.offset;
        for (int64_t i0 = 0; i0 < rows; i0 += tile)
          for (int64_t j0 = 0; j0 < cols; j0 += tile) {
            int64_t i1 = std::min(i0 + tile, rows);
            int64_t j1 = std::min(j0 + tile, cols);
            for (int64_t i = i0; i < i1; ++i)
              for (int64_t j = j0; j < j1; ++j)
                out[i * cols + j] = in[i + j * colStride];
          }
      }
    });
    return;
  }

  // Otherwise copy output rows: memcpy where the source row is contiguous,
  // a fill where it is broadcast, a strided gather otherwise.
  int64_t numRows = total / cols;
  ArrayRef<int64_t> rowShape = shape.drop_back();
  ArrayRef<int64_t> rowStrides = strides.drop_back();
  parallelRanges(numRows, bytes, [&](int64_t begin, int64_t end) {
    Odometer row(rowShape, rowStrides, begin);
    for (int64_t r = begin; r < end; ++r, row.next()) {
      E *out = dst + r * cols;
      const E *in = src + row.offset;
      if (colStride == 1)
        std::memcpy(out, in, cols * sizeof(E));
      else if (colStride == 0)
        std::fill_n(out, cols, in[0]);
      else
        for (int64_t j = 0; j < cols; ++j)
          out[j] = in[j * colStride];
    }
  });
}

/// Writes the view of `src` with the given shape and element strides
/// (0 broadcasts, negative steps backwards) starting `base` elements into
/// `src` to the contiguous `dst`.
static void copyView(void *dst, const void *src, size_t elemSize,
                     ArrayRef<int64_t> shape, ArrayRef<int64_t> strides,
                     int64_t base) {
  if (numElements(shape) == 0)
    return;
  Dims s(shape.begin(), shape.end()), t(strides.begin(), strides.end());
  simplifyView(s, t);
  visitElementSize(elemSize, [&](auto tag) {
    using E = decltype(tag);
    copyViewTyped(static_cast<E *>(dst), static_cast<const E *>(src) + base, s,
                  t);
  });
}

Error runTranspose(const KernelCall &call) {
  if (Error e = requireIO(call, 1))
    return e;
  const TensorRef &in = *call.input(0);
  TensorRef &out = *call.output(0);
  int64_t rank = in.rank();
  Dims perm;
  if (call.attrs.has("perm")) {
    ArrayRef<int64_t> p = call.attrs.getInts("perm");
    perm.assign(p.begin(), p.end());
  } else {
    for (int64_t d = rank; d-- > 0;)
      perm.push_back(d);
  }
  if (static_cast<int64_t>(perm.size()) != rank)
    return kernelError("Transpose: perm has " + Twine(perm.size()) +
                       " entries for an input of rank " + Twine(rank));
  SmallVector<bool, 6> seen(rank, false);
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || seen[p])
      return kernelError("Transpose: perm is not a permutation of 0.." +
                         Twine(rank - 1));
    seen[p] = true;
  }
  Dims inStrides = contiguousStrides(in.shape), shape, strides;
  for (int64_t p : perm) {
    shape.push_back(in.shape[p]);
    strides.push_back(inStrides[p]);
  }
  if (Error e = checkOutputShape(call, out, shape))
    return e;
  copyView(out.data, in.data, dtypeSize(in.dtype), shape, strides, 0);
  return Error::success();
}

/// Slice's starts/ends/axes/steps: attributes before opset 10, inputs from
/// 10 on. An absent list comes back empty.
static Dims sliceList(const KernelCall &call, StringRef name, size_t input) {
  if (call.opsetVersion < 10) {
    ArrayRef<int64_t> v = call.attrs.getInts(name);
    return Dims(v.begin(), v.end());
  }
  if (const TensorRef *t = call.input(input))
    return loadIndexList(*t);
  return Dims();
}

Error runSlice(const KernelCall &call) {
  if (Error e = requireIO(call, call.opsetVersion < 10 ? 1 : 3))
    return e;
  const TensorRef &in = *call.input(0);
  TensorRef &out = *call.output(0);
  Dims starts = sliceList(call, "starts", 1), ends = sliceList(call, "ends", 2),
       axes = sliceList(call, "axes", 3), steps = sliceList(call, "steps", 4);
  auto view = computeSliceView("Slice", in.shape, starts, ends, axes, steps);
  if (!view)
    return view.takeError();
  if (Error e = checkOutputShape(call, out, view->shape))
    return e;
  copyView(out.data, in.data, dtypeSize(in.dtype), view->shape, view->strides,
           view->base);
  return Error::success();
}

Error runExpand(const KernelCall &call) {
  if (Error e = requireIO(call, 1))
    return e;
  const TensorRef &in = *call.input(0);
  TensorRef &out = *call.output(0);
  // The output shape is broadcast(input, shape input): the input must
  // broadcast to it without changing it.
  bool ok = in.rank() <= out.rank();
  for (int64_t d = 0; ok && d < in.rank(); ++d) {
    int64_t o = out.shape[out.rank() - in.rank() + d];
    ok = in.shape[d] == o || in.shape[d] == 1;
  }
  if (!ok)
    return kernelError("Expand: input shape " + formatShape(in.shape) +
                       " does not broadcast to output shape " +
                       formatShape(out.shape));
  if (const TensorRef *s = call.input(1)) {
    auto expected = broadcastShapes(in.shape, loadIndexList(*s));
    if (!expected)
      return expected.takeError();
    if (Error e = checkOutputShape(call, out, *expected))
      return e;
  }
  copyView(out.data, in.data, dtypeSize(in.dtype), out.shape,
           broadcastStrides(in.shape, out.shape), 0);
  return Error::success();
}

//===----------------------------------------------------------------------===//
// Block copies
//===----------------------------------------------------------------------===//

Error runGather(const KernelCall &call) {
  if (Error e = requireIO(call, 2))
    return e;
  const TensorRef &data = *call.input(0);
  const TensorRef &indices = *call.input(1);
  TensorRef &out = *call.output(0);
  auto axisOr = normalizeAxis(call.attrs.getInt("axis", 0), data.rank());
  if (!axisOr)
    return axisOr.takeError();
  int64_t axis = *axisOr;
  if (data.rank() == 0)
    return kernelError("Gather: data must have rank >= 1");
  Dims shape(data.shape.begin(), data.shape.begin() + axis);
  shape.append(indices.shape.begin(), indices.shape.end());
  shape.append(data.shape.begin() + axis + 1, data.shape.end());
  if (Error e = checkOutputShape(call, out, shape))
    return e;

  // Indices are read where they are used (a token batch can hold many):
  // checked here, wrapped in the loop.
  int64_t dim = data.shape[axis];
  int64_t count = indices.numElements();
  for (int64_t i = 0; i < count; ++i) {
    int64_t v = loadIndex(indices, i);
    if (v < -dim || v >= dim)
      return kernelError("Gather: index " + Twine(v) + " at position " +
                         Twine(i) + " is out of range for axis " + Twine(axis) +
                         " of size " + Twine(dim));
  }
  auto idx = [&](int64_t j) {
    int64_t v = loadIndex(indices, j);
    return v < 0 ? v + dim : v;
  };
  int64_t outer = numElements(ArrayRef<int64_t>(data.shape).take_front(axis));
  int64_t inner =
      numElements(ArrayRef<int64_t>(data.shape).drop_front(axis + 1));
  visitElementSize(dtypeSize(data.dtype), [&](auto tag) {
    using E = decltype(tag);
    const E *src = data.as<E>();
    E *dst = out.as<E>();
    parallelRanges(outer * count, out.byteSize() * 2,
                   [&](int64_t begin, int64_t end) {
                     for (int64_t k = begin; k < end; ++k) {
                       int64_t o = k / count, j = k % count;
                       const E *from = src + (o * dim + idx(j)) * inner;
                       if (inner == 1)
                         dst[k] = *from;
                       else
                         std::memcpy(dst + k * inner, from, inner * sizeof(E));
                     }
                   });
  });
  return Error::success();
}

/// zinc.GatherColumns(data[V, d], ids) -> Y and zinc.GatherColumnsInto(data,
/// ids, Y): a tile of an embedding lookup split by columns (the tile pass),
/// writing its columns [outColumn, outColumn + d) of each of Y's rows in
/// place (concat-in-place).
static Error runGatherColumnsOf(const KernelCall &call, bool into) {
  const TensorRef *data = call.input(0), *indices = call.input(1);
  TensorRef *out = into ? call.updated(2) : call.output(0);
  if (!data || !indices || !out || data->rank() != 2 || out->rank() < 1)
    return kernelError(call.opType + ": expects data [V, d], indices and an output");
  int64_t dim = data->shape[0], width = data->shape[1];
  int64_t total = out->shape.back(), column = call.attrs.getInt("outColumn", 0);
  int64_t count = indices->numElements();
  if (out->dtype != data->dtype || column < 0 || column + width > total ||
      out->numElements() != count * total)
    return kernelError(call.opType + ": output " + dtypeName(out->dtype) +
                       formatShape(out->shape) + " cannot take columns [" + Twine(column) +
                       ", " + Twine(column + width) + ") of " + Twine(count) + " rows");
  for (int64_t i = 0; i < count; ++i) {
    int64_t v = loadIndex(*indices, i);
    if (v < -dim || v >= dim)
      return kernelError(call.opType + ": index " + Twine(v) + " at position " + Twine(i) +
                         " is out of range for " + Twine(dim) + " rows");
  }
  size_t rowBytes = width * dtypeSize(data->dtype);
  const char *src = data->as<const char>();
  char *dst = out->as<char>() + column * dtypeSize(data->dtype);
  size_t dstRow = total * dtypeSize(data->dtype);
  parallelRanges(count, count * rowBytes * 2, [&](int64_t begin, int64_t end) {
    for (int64_t j = begin; j < end; ++j) {
      int64_t v = loadIndex(*indices, j);
      std::memcpy(dst + j * dstRow, src + (v < 0 ? v + dim : v) * rowBytes, rowBytes);
    }
  });
  return Error::success();
}

Error runGatherColumns(const KernelCall &call) { return runGatherColumnsOf(call, false); }

Error runGatherColumnsInto(const KernelCall &call) { return runGatherColumnsOf(call, true); }

/// Concat and Split: moves `parts` (each a [outer, partRow] block) to or from
/// the interleaved [outer, sum(partRow)] tensor. A null part is skipped but
/// still takes its place.
static void interleaveBlocks(char *whole, ArrayRef<char *> parts,
                             ArrayRef<size_t> partRow, int64_t outer,
                             bool toWhole) {
  size_t wholeRow = 0;
  for (size_t r : partRow)
    wholeRow += r;
  parallelRanges(outer, wholeRow * outer * 2, [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) {
      char *row = whole + o * wholeRow;
      for (size_t p = 0; p < parts.size(); ++p) {
        if (parts[p] && partRow[p]) {
          char *part = parts[p] + o * partRow[p];
          if (toWhole)
            std::memcpy(row, part, partRow[p]);
          else
            std::memcpy(part, row, partRow[p]);
        }
        row += partRow[p];
      }
    }
  });
}

Error runConcat(const KernelCall &call) {
  if (Error e = requireIO(call, 1))
    return e;
  TensorRef &out = *call.output(0);
  if (out.rank() == 0)
    return kernelError("Concat: scalars cannot be concatenated");
  auto axisOr = normalizeAxis(call.attrs.getInt("axis", 0), out.rank());
  if (!axisOr)
    return axisOr.takeError();
  int64_t axis = *axisOr;
  int64_t inner =
      numElements(ArrayRef<int64_t>(out.shape).drop_front(axis + 1));
  size_t es = dtypeSize(out.dtype);
  SmallVector<char *, 8> parts;
  SmallVector<size_t, 8> partRow;
  int64_t total = 0;
  for (size_t i = 0; i < call.inputs.size(); ++i) {
    const TensorRef *in = call.input(i);
    if (!in)
      return kernelError("Concat: input " + Twine(i) + " is missing");
    bool ok = in->dtype == out.dtype && in->rank() == out.rank();
    for (int64_t d = 0; ok && d < out.rank(); ++d)
      ok = d == axis || in->shape[d] == out.shape[d];
    if (!ok)
      return kernelError("Concat: input " + Twine(i) + " (" +
                         dtypeName(in->dtype) + formatShape(in->shape) +
                         ") does not fit output " + dtypeName(out.dtype) +
                         formatShape(out.shape) + " along axis " + Twine(axis));
    total += in->shape[axis];
    parts.push_back(static_cast<char *>(in->data));
    partRow.push_back(static_cast<size_t>(in->shape[axis] * inner) * es);
  }
  if (total != out.shape[axis])
    return kernelError("Concat: inputs add up to " + Twine(total) +
                       " along axis " + Twine(axis) + ", output has " +
                       Twine(out.shape[axis]));
  int64_t outer = numElements(ArrayRef<int64_t>(out.shape).take_front(axis));
  interleaveBlocks(static_cast<char *>(out.data), parts, partRow, outer,
                   /*toWhole=*/true);
  return Error::success();
}

/// The sizes Split cuts along its axis, as the spec defines them for the
/// model's opset: the split input (13+) or attribute (before 13), else
/// num_outputs (18) or equal parts.
static llvm::Expected<Dims> splitSizes(const KernelCall &call, int64_t dim) {
  size_t numOut = call.outputs.size();
  Dims sizes;
  if (call.opsetVersion >= 13) {
    if (const TensorRef *s = call.input(1))
      sizes = loadIndexList(*s);
  } else {
    ArrayRef<int64_t> s = call.attrs.getInts("split");
    sizes.assign(s.begin(), s.end());
  }
  if (!sizes.empty()) {
    int64_t sum = 0;
    for (int64_t s : sizes) {
      if (s < 0)
        return kernelError("Split: split size " + Twine(s) + " is negative");
      sum += s;
    }
    if (sizes.size() != numOut || sum != dim)
      return kernelError("Split: split sizes add up to " + Twine(sum) + " in " +
                         Twine(sizes.size()) + " parts, but axis has " +
                         Twine(dim) + " and there are " + Twine(numOut) +
                         " outputs");
    return sizes;
  }
  if (numOut == 0)
    return kernelError("Split: no outputs");
  int64_t n = static_cast<int64_t>(numOut);
  if (call.attrs.has("num_outputs")) {
    // Opset 18: equal parts of ceil(dim / n), the last one smaller.
    int64_t part = (dim + n - 1) / n;
    for (int64_t i = 0; i < n; ++i)
      sizes.push_back(std::clamp<int64_t>(dim - i * part, 0, part));
    return sizes;
  }
  if (dim % n != 0)
    return kernelError("Split: axis of size " + Twine(dim) +
                       " does not split into " + Twine(n) + " equal parts");
  sizes.assign(numOut, dim / n);
  return sizes;
}

Error runSplit(const KernelCall &call) {
  const TensorRef *in = call.input(0);
  if (!in)
    return kernelError("Split: input 0 is missing");
  if (in->rank() == 0)
    return kernelError("Split: a scalar cannot be split");
  auto axisOr = normalizeAxis(call.attrs.getInt("axis", 0), in->rank());
  if (!axisOr)
    return axisOr.takeError();
  int64_t axis = *axisOr;
  auto sizesOr = splitSizes(call, in->shape[axis]);
  if (!sizesOr)
    return sizesOr.takeError();
  int64_t inner =
      numElements(ArrayRef<int64_t>(in->shape).drop_front(axis + 1));
  size_t es = dtypeSize(in->dtype);
  SmallVector<char *, 8> parts;
  SmallVector<size_t, 8> partRow;
  for (size_t i = 0; i < call.outputs.size(); ++i) {
    int64_t size = (*sizesOr)[i];
    TensorRef *out = call.output(i);
    if (out) {
      Dims expected(in->shape.begin(), in->shape.end());
      expected[axis] = size;
      if (out->dtype != in->dtype)
        return kernelError("Split: output " + Twine(i) + " has type " +
                           dtypeName(out->dtype) + ", input has " +
                           dtypeName(in->dtype));
      if (ArrayRef<int64_t>(out->shape) != ArrayRef<int64_t>(expected))
        return kernelError("Split: output " + Twine(i) + " has shape " +
                           formatShape(out->shape) + ", expected " +
                           formatShape(expected));
    }
    parts.push_back(out ? static_cast<char *>(out->data) : nullptr);
    partRow.push_back(static_cast<size_t>(size * inner) * es);
  }
  int64_t outer = numElements(ArrayRef<int64_t>(in->shape).take_front(axis));
  interleaveBlocks(static_cast<char *>(in->data), parts, partRow, outer,
                   /*toWhole=*/false);
  return Error::success();
}

Error runTrilu(const KernelCall &call) {
  if (Error e = requireIO(call, 1))
    return e;
  const TensorRef &in = *call.input(0);
  TensorRef &out = *call.output(0);
  if (in.rank() < 2)
    return kernelError("Trilu: input must have rank >= 2, it has shape " +
                       formatShape(in.shape));
  if (Error e = checkOutputShape(call, out, in.shape))
    return e;
  int64_t k = 0;
  if (const TensorRef *kt = call.input(1)) {
    if (kt->numElements() != 1)
      return kernelError("Trilu: k must be a scalar");
    k = loadIndex(*kt, 0);
  }
  bool upper = call.attrs.getInt("upper", 1) != 0;
  int64_t rows = in.shape[in.rank() - 2], cols = in.shape[in.rank() - 1];
  int64_t allRows = in.numElements() / std::max<int64_t>(cols, 1);
  if (cols == 0)
    return Error::success();
  size_t es = dtypeSize(in.dtype);
  const char *src = static_cast<const char *>(in.data);
  char *dst = static_cast<char *>(out.data);
  // Row i keeps columns j with j - i >= k (upper) or j - i <= k (lower); all
  // zero bit patterns are the zero of every dtype.
  parallelRanges(allRows, out.byteSize() * 2, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      int64_t i = r % rows;
      // Clamped in int64 before adding so huge k cannot overflow.
      int64_t edge = std::clamp<int64_t>(k, -cols - rows, cols + rows) + i;
      int64_t keepFrom, keepTo;
      if (upper) {
        keepFrom = std::clamp<int64_t>(edge, 0, cols);
        keepTo = cols;
      } else {
        keepFrom = 0;
        keepTo = std::clamp<int64_t>(edge + 1, 0, cols);
      }
      size_t row = static_cast<size_t>(r * cols) * es;
      std::memset(dst + row, 0, keepFrom * es);
      if (keepTo > keepFrom && dst != src)
        std::memcpy(dst + row + keepFrom * es, src + row + keepFrom * es,
                    (keepTo - keepFrom) * es);
      std::memset(dst + row + keepTo * es, 0, (cols - keepTo) * es);
    }
  });
  return Error::success();
}

} // namespace zinc::cpu
