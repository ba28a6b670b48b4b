//===- ConstantTensor.cpp - Small tensors the frontend computes with ------===//
#include "compiler/frontend/ConstantTensor.h"
#include "compiler/frontend/AttributeConversion.h"
#include "llvm/Support/ErrorHandling.h"
#include <cmath>
#include <cstring>

namespace zinc::frontend {

using TP = onnx::TensorProto;

bool ConstantTensor::isFloatType(int elemType) {
  return elemType == TP::FLOAT || elemType == TP::DOUBLE;
}

bool ConstantTensor::isFoldableType(int elemType) {
  switch (elemType) {
  case TP::BOOL:
  case TP::INT8:
  case TP::INT16:
  case TP::INT32:
  case TP::INT64:
  case TP::UINT8:
  case TP::UINT16:
  case TP::UINT32:
  case TP::UINT64:
  case TP::FLOAT:
  case TP::DOUBLE:
    return true;
  default:
    return false;
  }
}

int64_t ConstantTensor::numElements() const {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

int64_t ConstantTensor::integerAt(int64_t k) const {
  if (!isFloat())
    return ints[k];
  double v = reals[k];
  // Out-of-range conversions are undefined in C++; saturate instead, which
  // is what every shape computation that overflows would want anyway.
  if (std::isnan(v))
    return 0;
  if (v >= 9.2233720368547758e18)
    return INT64_MAX;
  if (v <= -9.2233720368547758e18)
    return INT64_MIN;
  return static_cast<int64_t>(v);
}

double ConstantTensor::realAt(int64_t k) const {
  if (isFloat())
    return reals[k];
  if (elemType == TP::UINT64)
    return static_cast<double>(static_cast<uint64_t>(ints[k]));
  return static_cast<double>(ints[k]);
}

ConstantTensor ConstantTensor::make(int elemType,
                                    llvm::ArrayRef<int64_t> dims) {
  ConstantTensor t;
  t.elemType = elemType;
  t.dims.assign(dims.begin(), dims.end());
  if (t.isFloat())
    t.reals.assign(t.numElements(), 0.0);
  else
    t.ints.assign(t.numElements(), 0);
  return t;
}

/// `v` as the integer type `elemType` holds it (two's complement wrap).
static int64_t wrapInteger(int elemType, int64_t v) {
  switch (elemType) {
  case TP::BOOL:
    return v != 0;
  case TP::INT8:
    return static_cast<int8_t>(v);
  case TP::INT16:
    return static_cast<int16_t>(v);
  case TP::INT32:
    return static_cast<int32_t>(v);
  case TP::UINT8:
    return static_cast<uint8_t>(v);
  case TP::UINT16:
    return static_cast<uint16_t>(v);
  case TP::UINT32:
    return static_cast<uint32_t>(v);
  default:
    return v;
  }
}

void ConstantTensor::setInteger(int64_t k, int64_t v) {
  if (isFloat())
    setReal(k, elemType == TP::UINT64
                   ? static_cast<double>(static_cast<uint64_t>(v))
                   : static_cast<double>(v));
  else
    ints[k] = wrapInteger(elemType, v);
}

void ConstantTensor::setReal(int64_t k, double v) {
  if (elemType == TP::FLOAT)
    reals[k] = static_cast<float>(v);
  else if (elemType == TP::DOUBLE)
    reals[k] = v;
  else if (elemType == TP::BOOL)
    ints[k] = v != 0.0;
  else {
    ConstantTensor scalar;
    scalar.elemType = TP::DOUBLE;
    scalar.reals = {v};
    ints[k] = wrapInteger(elemType, scalar.integerAt(0));
  }
}

/// Reads little-endian element k of width `w` as raw bits.
static uint64_t readBits(const std::vector<uint8_t> &bytes, int64_t k,
                         size_t w) {
  uint64_t bits = 0;
  for (size_t i = 0; i < w; ++i)
    bits |= static_cast<uint64_t>(bytes[k * w + i]) << (8 * i);
  return bits;
}

llvm::Optional<ConstantTensor>
ConstantTensor::fromProto(const onnx::TensorProto &proto) {
  if (!isFoldableType(proto.data_type()) ||
      proto.data_location() == TP::EXTERNAL)
    return llvm::None;
  llvm::Expected<TensorData> data = convertTensor(proto);
  if (!data) {
    llvm::consumeError(data.takeError());
    return llvm::None;
  }
  ConstantTensor t = make(proto.data_type(), data->shape);
  int64_t n = t.numElements();
  size_t width = n ? data->bytes.size() / n : 0;
  if (static_cast<int64_t>(width) * n != static_cast<int64_t>(data->bytes.size()))
    return llvm::None;
  for (int64_t k = 0; k < n; ++k) {
    uint64_t bits = readBits(data->bytes, k, width);
    switch (proto.data_type()) {
    case TP::FLOAT: {
      uint32_t b = static_cast<uint32_t>(bits);
      float f;
      std::memcpy(&f, &b, sizeof f);
      t.reals[k] = f;
      break;
    }
    case TP::DOUBLE: {
      double d;
      std::memcpy(&d, &bits, sizeof d);
      t.reals[k] = d;
      break;
    }
    case TP::INT8:
      t.ints[k] = static_cast<int8_t>(bits);
      break;
    case TP::INT16:
      t.ints[k] = static_cast<int16_t>(bits);
      break;
    case TP::INT32:
      t.ints[k] = static_cast<int32_t>(bits);
      break;
    default: // bool, unsigned and int64: the bits are the value
      t.ints[k] = static_cast<int64_t>(bits);
      break;
    }
  }
  return t;
}

onnx::TensorProto ConstantTensor::toProto(const std::string &name) const {
  TP proto;
  proto.set_name(name);
  proto.set_data_type(elemType);
  for (int64_t d : dims)
    proto.add_dims(d);
  int64_t n = numElements();
  for (int64_t k = 0; k < n; ++k) {
    switch (elemType) {
    case TP::FLOAT:
      proto.add_float_data(static_cast<float>(reals[k]));
      break;
    case TP::DOUBLE:
      proto.add_double_data(reals[k]);
      break;
    case TP::INT64:
      proto.add_int64_data(ints[k]);
      break;
    case TP::UINT32:
    case TP::UINT64:
      proto.add_uint64_data(static_cast<uint64_t>(ints[k]));
      break;
    default: // bool and the narrow integers live widened in int32_data
      proto.add_int32_data(static_cast<int32_t>(ints[k]));
      break;
    }
  }
  return proto;
}

} // namespace zinc::frontend
