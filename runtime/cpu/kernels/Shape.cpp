//===- Shape.cpp - cpu kernels that reinterpret, describe or make shapes --===//
//
// Reshape, Unsqueeze, Squeeze, Flatten and Identity move no element: the
// plan fixed every output shape at compile time and all buffers are
// contiguous row-major, so each is one copy of the input bytes (Dropout is
// in Dropout.cpp).
// Shape, Constant, ConstantOfShape and Range write values that depend only on
// shapes and attributes.
//
//===----------------------------------------------------------------------===//
#include "KernelUtil.h"
#include "Kernels.h"
#include "llvm/ADT/Twine.h"
#include <algorithm>
#include <cmath>
#include <cstring>

using llvm::Error;
using llvm::Twine;

namespace zinc::cpu {

/// The input and output every kernel here needs, or an error naming the op.
static Error requireIO(const KernelCall &call, size_t numInputs) {
  for (size_t i = 0; i < numInputs; ++i)
    if (!call.input(i))
      return kernelError(call.opType + ": input " + Twine(i) + " is missing");
  if (!call.output(0))
    return kernelError(call.opType + ": output 0 is missing");
  return Error::success();
}

/// Copies input 0 to output 0 unchanged; the op only renames the shape.
static Error copyThrough(const KernelCall &call) {
  if (Error e = requireIO(call, 1))
    return e;
  const TensorRef &in = *call.input(0);
  TensorRef &out = *call.output(0);
  if (in.dtype != out.dtype)
    return kernelError(call.opType + ": input has type " + dtypeName(in.dtype) +
                       " but output has type " + dtypeName(out.dtype));
  if (in.numElements() != out.numElements())
    return kernelError(call.opType + ": input shape " + formatShape(in.shape) +
                       " and output shape " + formatShape(out.shape) +
                       " have different element counts");
  copyBytes(out.data, in.data, in.byteSize());
  return Error::success();
}

Error runReshape(const KernelCall &call) { return copyThrough(call); }
Error runUnsqueeze(const KernelCall &call) { return copyThrough(call); }
Error runSqueeze(const KernelCall &call) { return copyThrough(call); }
Error runFlatten(const KernelCall &call) { return copyThrough(call); }
Error runIdentity(const KernelCall &call) { return copyThrough(call); }

Error runShape(const KernelCall &call) {
  if (Error e = requireIO(call, 1))
    return e;
  const TensorRef &in = *call.input(0);
  TensorRef &out = *call.output(0);
  // Opset 15 slices the shape; out-of-range bounds clamp rather than fail.
  int64_t rank = in.rank();
  auto clampAxis = [rank](int64_t a) {
    if (a < 0)
      a += rank;
    return std::clamp<int64_t>(a, 0, rank);
  };
  int64_t start = clampAxis(call.attrs.getInt("start", 0));
  int64_t end = clampAxis(call.attrs.getInt("end", rank));
  int64_t count = std::max<int64_t>(end - start, 0);
  if (out.numElements() != count)
    return kernelError("Shape: output has " + Twine(out.numElements()) +
                       " elements but the shape slice has " + Twine(count));
  return visitDType(out.dtype, [&](auto tag) -> Error {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      return kernelError("Shape: output type bool cannot hold dimensions");
    } else {
      T *dst = out.as<T>();
      for (int64_t i = 0; i < count; ++i)
        dst[i] = store<T>(in.shape[start + i]);
      return Error::success();
    }
  });
}

/// Fills `out` with `count` copies of the element whose bytes are `value`.
static void fillPattern(TensorRef &out, const void *value) {
  int64_t n = out.numElements();
  visitDType(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    T v;
    std::memcpy(&v, value, sizeof(T));
    std::fill_n(out.as<T>(), n, v);
  });
}

/// Writes a list of doubles (value_float(s)) or int64s (value_int(s)) into
/// `out`, which must hold exactly as many elements of type `want`.
template <typename V>
static Error writeConstantList(TensorRef &out, DType want,
                               llvm::ArrayRef<V> values) {
  if (out.dtype != want)
    return kernelError(Twine("Constant: attribute gives type ") +
                       dtypeName(want) + " but output has type " +
                       dtypeName(out.dtype));
  if (out.numElements() != static_cast<int64_t>(values.size()))
    return kernelError("Constant: attribute has " + Twine(values.size()) +
                       " values but output shape is " + formatShape(out.shape));
  if constexpr (std::is_same_v<V, double>) {
    float *dst = out.as<float>();
    for (size_t i = 0; i < values.size(); ++i)
      dst[i] = static_cast<float>(values[i]);
  } else {
    std::copy(values.begin(), values.end(), out.as<int64_t>());
  }
  return Error::success();
}

Error runConstant(const KernelCall &call) {
  if (!call.output(0))
    return kernelError("Constant: output 0 is missing");
  TensorRef &out = *call.output(0);
  const AttributeList &attrs = call.attrs;
  if (const TensorData *t = attrs.getTensor("value")) {
    if (t->dtype != out.dtype)
      return kernelError(Twine("Constant: value has type ") +
                         dtypeName(t->dtype) + " but output has type " +
                         dtypeName(out.dtype));
    if (t->bytes.size() != out.byteSize() ||
        numElements(t->shape) != out.numElements())
      return kernelError("Constant: value has shape " + formatShape(t->shape) +
                         " but output has shape " + formatShape(out.shape));
    copyBytes(out.data, t->bytes.data(), t->bytes.size());
    return Error::success();
  }
  if (const Attribute *a = attrs.find("value_float")) {
    double v = a->f;
    return writeConstantList<double>(out, DType::F32, v);
  }
  if (const Attribute *a = attrs.find("value_floats"))
    return writeConstantList<double>(out, DType::F32, a->floats);
  if (const Attribute *a = attrs.find("value_int")) {
    int64_t v = a->i;
    return writeConstantList<int64_t>(out, DType::I64, v);
  }
  if (const Attribute *a = attrs.find("value_ints"))
    return writeConstantList<int64_t>(out, DType::I64, a->ints);
  if (attrs.has("sparse_value"))
    return kernelError("unsupported: Constant with sparse_value");
  if (attrs.has("value_string") || attrs.has("value_strings"))
    return kernelError("unsupported: Constant with a string value");
  return kernelError("Constant: none of value, value_float(s), value_int(s) "
                     "is set");
}

Error runConstantOfShape(const KernelCall &call) {
  if (Error e = requireIO(call, 1))
    return e;
  const TensorRef &shapeIn = *call.input(0);
  TensorRef &out = *call.output(0);
  int64_t count = 1;
  for (int64_t d : loadIndexList(shapeIn)) {
    if (d < 0)
      return kernelError("ConstantOfShape: dimension " + Twine(d) +
                         " is negative");
    count *= d;
  }
  if (count != out.numElements())
    return kernelError("ConstantOfShape: the shape input has " + Twine(count) +
                       " elements but output shape is " +
                       formatShape(out.shape));
  const TensorData *value = call.attrs.getTensor("value");
  if (!value) {
    // The default is a float32 zero.
    if (out.dtype != DType::F32)
      return kernelError(Twine("ConstantOfShape: without value the output "
                               "must be f32, not ") +
                         dtypeName(out.dtype));
    std::memset(out.data, 0, out.byteSize());
    return Error::success();
  }
  if (value->dtype != out.dtype)
    return kernelError(Twine("ConstantOfShape: value has type ") +
                       dtypeName(value->dtype) + " but output has type " +
                       dtypeName(out.dtype));
  if (value->bytes.size() != dtypeSize(value->dtype))
    return kernelError("ConstantOfShape: value must hold one element, it has "
                       "shape " +
                       formatShape(value->shape));
  fillPattern(out, value->bytes.data());
  return Error::success();
}

Error runRange(const KernelCall &call) {
  if (Error e = requireIO(call, 3))
    return e;
  TensorRef &out = *call.output(0);
  for (size_t i = 0; i < 3; ++i)
    if (call.input(i)->dtype != out.dtype || call.input(i)->numElements() != 1)
      return kernelError("Range: input " + Twine(i) +
                         " must be a scalar of the output's type");
  return visitDType(out.dtype, [&](auto tag) -> Error {
    using T = decltype(tag);
    using C = ComputeT<T>;
    if constexpr (std::is_same_v<T, bool>) {
      return kernelError("Range: bool is not a numeric type");
    } else {
      C start = load(call.input(0)->template as<T>()[0]);
      C limit = load(call.input(1)->template as<T>()[0]);
      C delta = load(call.input(2)->template as<T>()[0]);
      if (delta == C(0))
        return kernelError("Range: delta is zero");
      int64_t count;
      if constexpr (std::is_integral_v<C>) {
        // Integer ceil division without going through floating point, which
        // would lose exactness for large int64 ranges.
        int64_t span =
            static_cast<int64_t>(limit) - static_cast<int64_t>(start);
        int64_t step = static_cast<int64_t>(delta);
        if ((span > 0) != (step > 0) || span == 0)
          count = 0;
        else
          count = (span + step + (step > 0 ? -1 : 1)) / step;
      } else {
        count = static_cast<int64_t>(
            std::max<C>(std::ceil((limit - start) / delta), C(0)));
      }
      if (count != out.numElements())
        return kernelError("Range: the range has " + Twine(count) +
                           " elements but output shape is " +
                           formatShape(out.shape));
      T *dst = out.as<T>();
      for (int64_t i = 0; i < count; ++i)
        dst[i] = store<T>(start + static_cast<C>(i) * delta);
      return Error::success();
    }
  });
}

} // namespace zinc::cpu
