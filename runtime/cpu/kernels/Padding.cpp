//===- Padding.cpp - cpu kernels that grow a tensor from its own elements -===//
//
// Pad (constant, reflect, edge, wrap) and Tile both fill each output row
// from one input row chosen per outer dimension, so they share the row walk;
// neither looks at values, so they move elements as bytes.
//
//===----------------------------------------------------------------------===//
#include "KernelUtil.h"
#include "Kernels.h"
#include "PadGeometry.h"
#include "llvm/ADT/Twine.h"
#include <cstring>

using llvm::Error;
using llvm::Twine;

namespace zinc::cpu {

using Dims = llvm::SmallVector<int64_t, 6>;

/// Calls fill(outRow, srcRow) for every row (last dimension) of `outShape`,
/// srcRow the flat index of the input row it reads, or -1 when a dimension
/// outside the last reads no input row. `source(d, o)` maps an output index
/// of dimension d to an input index, -1 for none.
template <typename Source, typename Fill>
static void forEachRowSource(llvm::ArrayRef<int64_t> outShape,
                             llvm::ArrayRef<int64_t> inShape,
                             size_t workBytes, const Source &source,
                             const Fill &fill) {
  size_t rank = outShape.size();
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < rank; ++d)
    rows *= outShape[d];
  if (rank == 0 || zinc::numElements(outShape) == 0)
    return;
  parallelRanges(rows, workBytes, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      int64_t rest = r, src = 0, stride = 1;
      bool none = false;
      for (size_t d = rank - 1; d-- > 0;) {
        int64_t o = rest % outShape[d];
        rest /= outShape[d];
        int64_t i = source(d, o);
        none |= i < 0;
        src += i * stride;
        stride *= inShape[d];
      }
      fill(r, none ? -1 : src);
    }
  });
}

template <typename E>
static void padRows(const PadGeometry &g, const TensorRef &in, TensorRef &out,
                    E constant) {
  const E *x = in.as<const E>();
  E *y = out.as<E>();
  size_t last = g.outShape.size() - 1;
  int64_t outRow = g.outShape[last], inRow = g.inShape[last];
  forEachRowSource(
      g.outShape, g.inShape, out.byteSize() * 2,
      [&](size_t d, int64_t o) { return padSource(g, d, o); },
      [&](int64_t r, int64_t src) {
        E *dst = y + r * outRow;
        if (src < 0) {
          std::fill(dst, dst + outRow, constant);
          return;
        }
        const E *row = x + src * inRow;
        for (int64_t j = 0; j < outRow; ++j) {
          int64_t i = padSource(g, last, j);
          dst[j] = i < 0 ? constant : row[i];
        }
      });
}

/// Pad(data, pads, constant_value?, axes?) {mode}; before opset 11 the
/// pads and the constant are attributes (pads, value).
Error runPad(const KernelCall &call) {
  const TensorRef *in = call.input(0);
  TensorRef *out = call.output(0);
  if (!in || !out || (call.opsetVersion >= 11 && !call.input(1)))
    return kernelError("Pad: expects data, pads and an output");
  if (in->dtype != out->dtype)
    return kernelError("Pad: output type differs from the data's");
  llvm::Expected<PadGeometry> g =
      padGeometry(call, in->shape, out->shape, 1, 3);
  if (!g)
    return g.takeError();
  if (out->numElements() == 0)
    return Error::success();
  if (in->rank() == 0) {
    copyBytes(out->data, in->data, in->byteSize());
    return Error::success();
  }
  size_t es = dtypeSize(in->dtype);
  const TensorRef *value = call.input(2);
  if (value && (value->dtype != in->dtype || value->numElements() != 1))
    return kernelError("Pad: constant_value must be a scalar of the data's "
                       "type");
  auto run = [&](auto tag) {
    using E = decltype(tag);
    E constant{};
    if (value)
      std::memcpy(&constant, value->data, sizeof(E));
    else if (call.opsetVersion < 11)
      visitDType(in->dtype, [&](auto t) {
        using T = decltype(t);
        if constexpr (sizeof(T) == sizeof(E)) {
          T v = store<T>(static_cast<ComputeT<T>>(call.attrs.getFloat("value", 0)));
          std::memcpy(&constant, &v, sizeof(E));
        }
      });
    padRows<E>(*g, *in, *out, constant);
  };
  visitElementSize(es, run);
  return Error::success();
}

/// Tile(input, repeats): output index o of dimension d reads o mod size.
Error runTile(const KernelCall &call) {
  const TensorRef *in = call.input(0), *repeats = call.input(1);
  TensorRef *out = call.output(0);
  if (!in || !repeats || !out)
    return kernelError("Tile: expects input, repeats and an output");
  if (in->dtype != out->dtype)
    return kernelError("Tile: output type differs from the input's");
  Dims reps = loadIndexList(*repeats);
  if (static_cast<int64_t>(reps.size()) != in->rank() ||
      out->rank() != in->rank())
    return kernelError("Tile: repeats has " + Twine(reps.size()) +
                       " entries for an input of rank " + Twine(in->rank()));
  for (int64_t d = 0; d < in->rank(); ++d)
    if (reps[d] < 0 || in->shape[d] * reps[d] != out->shape[d])
      return kernelError("Tile: dimension " + Twine(d) + " of size " +
                         Twine(in->shape[d]) + " repeated " + Twine(reps[d]) +
                         " times is not the output's " +
                         Twine(out->shape[d]));
  if (out->numElements() == 0)
    return Error::success();
  if (in->rank() == 0) {
    copyBytes(out->data, in->data, in->byteSize());
    return Error::success();
  }
  size_t es = dtypeSize(in->dtype);
  int64_t last = in->rank() - 1;
  size_t inRow = in->shape[last] * es, outRow = out->shape[last] * es;
  const char *x = static_cast<const char *>(in->data);
  char *y = static_cast<char *>(out->data);
  forEachRowSource(
      out->shape, in->shape, out->byteSize() * 2,
      [&](size_t d, int64_t o) { return o % in->shape[d]; },
      [&](int64_t r, int64_t src) {
        for (size_t at = 0; at < outRow; at += inRow)
          std::memcpy(y + r * outRow + at, x + src * inRow, inRow);
      });
  return Error::success();
}

} // namespace zinc::cpu
