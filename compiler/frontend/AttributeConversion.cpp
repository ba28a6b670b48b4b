//===- AttributeConversion.cpp - ONNX attributes and tensors to zinc's ----===//
#include "compiler/frontend/AttributeConversion.h"
#include "compiler/frontend/OnnxUtil.h"
#include "zinc/support/Error.h"
#include <cstring>
#include <type_traits>

namespace zinc::frontend {

/// Appends `count` typed values as little-endian elements of `width` bytes.
/// ONNX keeps 8/16-bit integers, bool, f16 and bf16 widened in int32_data
/// (f16/bf16 as their bit patterns), so narrowing is the intended decoding.
template <typename Field>
static void appendLittleEndian(const Field &values, size_t width,
                               std::vector<uint8_t> &bytes) {
  for (auto v : values) {
    uint64_t bits = 0;
    if constexpr (std::is_same_v<decltype(v), float>) {
      uint32_t b;
      std::memcpy(&b, &v, sizeof b);
      bits = b;
    } else if constexpr (std::is_same_v<decltype(v), double>) {
      std::memcpy(&bits, &v, sizeof bits);
    } else {
      bits = static_cast<uint64_t>(v);
    }
    for (size_t i = 0; i < width; ++i)
      bytes.push_back(static_cast<uint8_t>(bits >> (8 * i)));
  }
}

int64_t typedValueCount(const onnx::TensorProto &tensor, DType dtype) {
  switch (dtype) {
  case DType::F32:
    return tensor.float_data_size();
  case DType::F64:
    return tensor.double_data_size();
  case DType::I64:
    return tensor.int64_data_size();
  case DType::U32:
  case DType::U64:
    return tensor.uint64_data_size();
  case DType::I32:
  case DType::I16:
  case DType::I8:
  case DType::U16:
  case DType::U8:
  case DType::Bool:
  case DType::F16:
  case DType::BF16:
    return tensor.int32_data_size();
  }
  return 0;
}

llvm::Expected<TensorData> convertTensor(const onnx::TensorProto &tensor) {
  if (tensor.data_location() == onnx::TensorProto::EXTERNAL)
    return makeError("tensor '" + tensor.name() +
                     "' keeps its data in an external file; zinc reads "
                     "external data only for initializers");
  llvm::Optional<DType> dtype = dtypeFromOnnx(tensor.data_type());
  if (!dtype)
    return makeError("tensor '" + tensor.name() +
                     "' has unsupported element type " +
                     elementTypeName(tensor.data_type()));
  TensorData out;
  out.dtype = *dtype;
  for (int64_t d : tensor.dims()) {
    if (d < 0)
      return makeError("tensor '" + tensor.name() +
                       "' has a negative dimension " + std::to_string(d));
    out.shape.push_back(d);
  }
  const int64_t count = numElements(out.shape);
  const size_t width = dtypeSize(*dtype);
  const uint64_t expectedBytes = static_cast<uint64_t>(count) * width;

  if (tensor.has_raw_data()) {
    if (tensor.raw_data().size() != expectedBytes)
      return makeError("tensor '" + tensor.name() + "' has " +
                       std::to_string(tensor.raw_data().size()) +
                       " bytes of data, expected " +
                       std::to_string(expectedBytes) + " for shape " +
                       formatShape(out.shape) + " of " +
                       dtypeName(*dtype).str());
    out.bytes.assign(tensor.raw_data().begin(), tensor.raw_data().end());
    return out;
  }

  int64_t have = typedValueCount(tensor, *dtype);
  if (have != count)
    return makeError("tensor '" + tensor.name() + "' has " +
                     std::to_string(have) + " values, expected " +
                     std::to_string(count) + " for shape " +
                     formatShape(out.shape));
  out.bytes.reserve(expectedBytes);
  switch (*dtype) {
  case DType::F32:
    appendLittleEndian(tensor.float_data(), width, out.bytes);
    break;
  case DType::F64:
    appendLittleEndian(tensor.double_data(), width, out.bytes);
    break;
  case DType::I64:
    appendLittleEndian(tensor.int64_data(), width, out.bytes);
    break;
  case DType::U32:
  case DType::U64:
    appendLittleEndian(tensor.uint64_data(), width, out.bytes);
    break;
  default:
    appendLittleEndian(tensor.int32_data(), width, out.bytes);
    break;
  }
  return out;
}

/// Old models (IR version 1) may leave `type` unset; the field that holds a
/// value says what it is.
static onnx::AttributeProto::AttributeType
attributeType(const onnx::AttributeProto &attr) {
  using AP = onnx::AttributeProto;
  if (attr.type() != AP::UNDEFINED)
    return attr.type();
  if (attr.has_f())
    return AP::FLOAT;
  if (attr.has_i())
    return AP::INT;
  if (attr.has_s())
    return AP::STRING;
  if (attr.has_t())
    return AP::TENSOR;
  if (attr.has_g())
    return AP::GRAPH;
  if (attr.floats_size())
    return AP::FLOATS;
  if (attr.ints_size())
    return AP::INTS;
  if (attr.strings_size())
    return AP::STRINGS;
  return AP::UNDEFINED;
}

static const char *attributeTypeName(onnx::AttributeProto::AttributeType t) {
  using AP = onnx::AttributeProto;
  switch (t) {
  case AP::GRAPH:
    return "graph";
  case AP::GRAPHS:
    return "list of graphs";
  case AP::SPARSE_TENSOR:
    return "sparse tensor";
  case AP::SPARSE_TENSORS:
    return "list of sparse tensors";
  case AP::TENSORS:
    return "list of tensors";
  case AP::TYPE_PROTO:
    return "type";
  case AP::TYPE_PROTOS:
    return "list of types";
  default:
    return "unknown";
  }
}

llvm::Expected<Attribute> convertAttribute(const onnx::AttributeProto &attr) {
  using AP = onnx::AttributeProto;
  Attribute out;
  out.name = attr.name();
  if (!attr.ref_attr_name().empty())
    return makeError("attribute '" + attr.name() +
                     "' refers to a function attribute; unsupported");
  AP::AttributeType type = attributeType(attr);
  switch (type) {
  case AP::FLOAT:
    out.kind = AttrKind::Float;
    out.f = attr.f();
    return out;
  case AP::INT:
    out.kind = AttrKind::Int;
    out.i = attr.i();
    return out;
  case AP::STRING:
    out.kind = AttrKind::String;
    out.s = attr.s();
    return out;
  case AP::FLOATS:
    out.kind = AttrKind::Floats;
    out.floats.assign(attr.floats().begin(), attr.floats().end());
    return out;
  case AP::INTS:
    out.kind = AttrKind::Ints;
    out.ints.assign(attr.ints().begin(), attr.ints().end());
    return out;
  case AP::STRINGS:
    out.kind = AttrKind::Strings;
    out.strings.assign(attr.strings().begin(), attr.strings().end());
    return out;
  case AP::TENSOR: {
    llvm::Expected<TensorData> t = convertTensor(attr.t());
    if (!t)
      return addContext(t.takeError(), "attribute '" + attr.name() + "'");
    out.kind = AttrKind::Tensor;
    out.tensor = std::move(*t);
    return out;
  }
  default:
    return makeError("attribute '" + attr.name() + "' is a " +
                     attributeTypeName(type) + "; unsupported");
  }
}

} // namespace zinc::frontend
