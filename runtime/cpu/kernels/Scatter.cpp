//===- Scatter.cpp - ScatterND, ScatterElements and GatherElements --------===//
//
// GatherElements reads what ScatterElements writes (its gradient is a
// scatter-add). The scatters copy the data to the output and then write (or, with a reduction,
// combine) the updates at the indexed places, in index order, so a repeated
// index takes the last update as ONNX's reference does. Negative indices
// count from the end; an index out of range fails the step, naming it.
//
//===----------------------------------------------------------------------===//
#include "KernelUtil.h"
#include "Kernels.h"
#include "llvm/ADT/Twine.h"
#include <cstring>

namespace zinc::cpu {

namespace {
enum class ScatterReductionKind { None, Add, Mul, Max, Min };
} // namespace

static llvm::Expected<ScatterReductionKind>
scatterReduction(const KernelCall &call) {
  llvm::StringRef r = call.attrs.getString("reduction", "none");
  if (r == "none")
    return ScatterReductionKind::None;
  if (r == "add")
    return ScatterReductionKind::Add;
  if (r == "mul")
    return ScatterReductionKind::Mul;
  if (r == "max")
    return ScatterReductionKind::Max;
  if (r == "min")
    return ScatterReductionKind::Min;
  return kernelError(call.opType + ": unsupported reduction '" + r + "'");
}

template <typename T>
static void combine(T &dst, T src, ScatterReductionKind kind) {
  if constexpr (std::is_same_v<T, bool>) {
    if (kind == ScatterReductionKind::Add || kind == ScatterReductionKind::Max)
      dst = dst || src;
    else if (kind == ScatterReductionKind::Mul ||
             kind == ScatterReductionKind::Min)
      dst = dst && src;
    else
      dst = src;
  } else {
    auto a = load(dst), b = load(src);
    switch (kind) {
    case ScatterReductionKind::None:
      dst = src;
      return;
    case ScatterReductionKind::Add:
      dst = store<T>(static_cast<decltype(a)>(a + b));
      return;
    case ScatterReductionKind::Mul:
      dst = store<T>(static_cast<decltype(a)>(a * b));
      return;
    case ScatterReductionKind::Max:
      dst = store<T>(a < b ? b : a);
      return;
    case ScatterReductionKind::Min:
      dst = store<T>(b < a ? b : a);
      return;
    }
  }
}

static llvm::Error checkCommon(const KernelCall &call) {
  const TensorRef *data = call.input(0), *indices = call.input(1),
                  *updates = call.input(2);
  const TensorRef *out = call.output(0);
  if (!data || !indices || !updates || !out)
    return kernelError(call.opType + ": expects data, indices, updates and "
                                     "an output");
  if (updates->dtype != data->dtype || out->dtype != data->dtype ||
      out->shape != data->shape)
    return kernelError(call.opType + ": data, updates and output must share "
                                     "a type, and the output the data's shape");
  return llvm::Error::success();
}

/// Index `index` (element `position` of the indices) into a dimension of
/// `size`, negative counting from the end; an error naming it when out of
/// range.
static llvm::Expected<int64_t> wrapIndex(const KernelCall &call,
                                         int64_t position, int64_t index,
                                         int64_t size) {
  if (index >= -size && index < size)
    return index < 0 ? index + size : index;
  return kernelError(call.opType + ": index " + llvm::Twine(index) +
                     " at position " + llvm::Twine(position) +
                     " of the indices is out of range for a dimension of "
                     "size " +
                     llvm::Twine(size));
}

/// Steps the row-major index `idx` of `shape` to the next element.
static void nextIndex(llvm::SmallVectorImpl<int64_t> &idx,
                      llvm::ArrayRef<int64_t> shape) {
  for (size_t d = idx.size(); d-- > 0;) {
    if (++idx[d] < shape[d])
      return;
    idx[d] = 0;
  }
}

/// ScatterND(data, indices, updates) {reduction}: indices [..., k] pick
/// slices data[i0, ..., ik-1] of the trailing dimensions.
llvm::Error runScatterND(const KernelCall &call) {
  if (auto err = checkCommon(call))
    return err;
  const TensorRef &data = *call.input(0), &indices = *call.input(1),
                  &updates = *call.input(2);
  TensorRef &out = *call.output(0);
  llvm::Expected<ScatterReductionKind> kind = scatterReduction(call);
  if (!kind)
    return kind.takeError();
  if (indices.rank() == 0)
    return kernelError("ScatterND: indices must have rank >= 1");
  int64_t k = indices.shape.back();
  if (k > data.rank())
    return kernelError("ScatterND: index tuples of length " + llvm::Twine(k) +
                       " for data of rank " + llvm::Twine(data.rank()));
  int64_t tuples =
      zinc::numElements(llvm::ArrayRef<int64_t>(indices.shape).drop_back());
  int64_t slice = 1;
  for (int64_t d = k; d < data.rank(); ++d)
    slice *= data.shape[d];
  if (updates.numElements() != tuples * slice)
    return kernelError("ScatterND: updates have " +
                       llvm::Twine(updates.numElements()) +
                       " elements, expected " + llvm::Twine(tuples * slice));
  copyBytes(out.data, data.data, data.byteSize());
  llvm::SmallVector<int64_t, 6> strides = contiguousStrides(data.shape);
  return visitDType(data.dtype, [&](auto tag) -> llvm::Error {
    using T = decltype(tag);
    T *po = out.as<T>();
    const T *pu = updates.as<const T>();
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t offset = 0;
      for (int64_t j = 0; j < k; ++j) {
        llvm::Expected<int64_t> i = wrapIndex(
            call, t * k + j, loadIndex(indices, t * k + j), data.shape[j]);
        if (!i)
          return i.takeError();
        offset += *i * strides[j];
      }
      for (int64_t e = 0; e < slice; ++e)
        combine(po[offset + e], pu[t * slice + e], *kind);
    }
    return llvm::Error::success();
  });
}

/// Whether each axis of `inner` but `axis` fits the data's, as
/// GatherElements' indices and ScatterElements' updates must (their other
/// coordinates address the data directly).
static llvm::Error checkWithinData(const KernelCall &call, const TensorRef &inner,
                                   const TensorRef &data, int64_t axis, const char *what) {
  for (int64_t d = 0; d < data.rank(); ++d)
    if (d != axis && inner.shape[d] > data.shape[d])
      return kernelError(call.opType + ": " + what + " shape " + formatShape(inner.shape) +
                         " exceeds the data's " + formatShape(data.shape) + " on axis " +
                         llvm::Twine(d));
  return llvm::Error::success();
}

/// ScatterElements(data, indices, updates) {axis, reduction}: element p of
/// the updates goes to p with its `axis` coordinate replaced by indices[p].
llvm::Error runScatterElements(const KernelCall &call) {
  if (auto err = checkCommon(call))
    return err;
  const TensorRef &data = *call.input(0), &indices = *call.input(1),
                  &updates = *call.input(2);
  TensorRef &out = *call.output(0);
  llvm::Expected<ScatterReductionKind> kind = scatterReduction(call);
  if (!kind)
    return kind.takeError();
  if (indices.shape != updates.shape || indices.rank() != data.rank())
    return kernelError(call.opType + ": indices and updates must have one "
                                     "shape, of the data's rank");
  llvm::Expected<int64_t> axis =
      normalizeAxis(call.attrs.getInt("axis", 0), data.rank());
  if (!axis)
    return axis.takeError();
  if (auto err = checkWithinData(call, updates, data, *axis, "updates"))
    return err;
  copyBytes(out.data, data.data, data.byteSize());
  llvm::SmallVector<int64_t, 6> strides = contiguousStrides(data.shape);
  int64_t size = data.shape[*axis];
  return visitDType(data.dtype, [&](auto tag) -> llvm::Error {
    using T = decltype(tag);
    T *po = out.as<T>();
    const T *pu = updates.as<const T>();
    int64_t count = indices.numElements(), rank = indices.rank();
    llvm::SmallVector<int64_t, 6> idx(rank, 0);
    for (int64_t p = 0; p < count; ++p) {
      llvm::Expected<int64_t> i = wrapIndex(call, p, loadIndex(indices, p), size);
      if (!i)
        return i.takeError();
      int64_t offset = 0;
      for (int64_t d = 0; d < rank; ++d)
        offset += (d == *axis ? *i : idx[d]) * strides[d];
      combine(po[offset], pu[p], *kind);
      nextIndex(idx, indices.shape);
    }
    return llvm::Error::success();
  });
}

/// GatherElements(data, indices) {axis}: output p is data at p with its
/// `axis` coordinate replaced by indices[p].
llvm::Error runGatherElements(const KernelCall &call) {
  const TensorRef *data = call.input(0), *indices = call.input(1);
  TensorRef *out = call.output(0);
  if (!data || !indices || !out)
    return kernelError("GatherElements: expects data, indices and an output");
  if (out->dtype != data->dtype || out->shape != indices->shape ||
      indices->rank() != data->rank())
    return kernelError("GatherElements: the output must have the data's type "
                       "and the indices' shape, of the data's rank");
  llvm::Expected<int64_t> axis =
      normalizeAxis(call.attrs.getInt("axis", 0), data->rank());
  if (!axis)
    return axis.takeError();
  if (auto err = checkWithinData(call, *indices, *data, *axis, "indices"))
    return err;
  llvm::SmallVector<int64_t, 6> strides = contiguousStrides(data->shape);
  int64_t size = data->shape[*axis], rank = indices->rank();
  int64_t count = indices->numElements();
  size_t es = dtypeSize(data->dtype);
  const char *src = static_cast<const char *>(data->data);
  char *dst = static_cast<char *>(out->data);
  llvm::SmallVector<int64_t, 6> idx(rank, 0);
  for (int64_t p = 0; p < count; ++p) {
    llvm::Expected<int64_t> i = wrapIndex(call, p, loadIndex(*indices, p), size);
    if (!i)
      return i.takeError();
    int64_t offset = 0;
    for (int64_t d = 0; d < rank; ++d)
      offset += (d == *axis ? *i : idx[d]) * strides[d];
    std::memcpy(dst + p * es, src + offset * es, es);
    nextIndex(idx, indices->shape);
  }
  return llvm::Error::success();
}

} // namespace zinc::cpu
