//===- OnnxUtil.cpp - Small helpers over onnx protos shared by the frontend
//===//
#include "compiler/frontend/OnnxUtil.h"
#include "zinc/support/DType.h"
#include "llvm/ADT/Twine.h"

namespace zinc::frontend {

std::string nodeName(const onnx::NodeProto &node, size_t index) {
  if (!node.name().empty())
    return node.name();
  return (llvm::Twine(node.op_type()) + "_" + llvm::Twine(index)).str();
}

std::string describeNode(const onnx::NodeProto &node, size_t index) {
  std::string op = node.op_type();
  if (!isDefaultDomain(node.domain()))
    op = node.domain() + "." + op;
  return "node '" + nodeName(node, index) + "' (" + op + ")";
}

bool isDefaultDomain(llvm::StringRef domain) {
  return domain.empty() || domain == "ai.onnx";
}

std::string elementTypeName(int onnxCode) {
  if (llvm::Optional<DType> t = dtypeFromOnnx(onnxCode))
    return dtypeName(*t).str();
  switch (onnxCode) {
  case onnx::TensorProto::UNDEFINED:
    return "undefined";
  case onnx::TensorProto::STRING:
    return "string";
  case onnx::TensorProto::COMPLEX64:
    return "complex64";
  case onnx::TensorProto::COMPLEX128:
    return "complex128";
  default:
    // Codes newer than this libonnx (float8 variants, ...).
    return "<onnx type " + std::to_string(onnxCode) + ">";
  }
}

llvm::Optional<llvm::SmallVector<int64_t, 4>>
staticShape(const onnx::TypeProto &type) {
  if (!type.has_tensor_type() || !type.tensor_type().has_shape())
    return llvm::None;
  llvm::SmallVector<int64_t, 4> shape;
  for (const onnx::TensorShapeProto::Dimension &d :
       type.tensor_type().shape().dim()) {
    if (!d.has_dim_value() || d.dim_value() < 0)
      return llvm::None;
    shape.push_back(d.dim_value());
  }
  return shape;
}

const char *typeKindName(const onnx::TypeProto &type) {
  switch (type.value_case()) {
  case onnx::TypeProto::kTensorType:
    return "tensor";
  case onnx::TypeProto::kSequenceType:
    return "sequence";
  case onnx::TypeProto::kMapType:
    return "map";
  case onnx::TypeProto::kOptionalType:
    return "optional";
  case onnx::TypeProto::kSparseTensorType:
    return "sparse tensor";
  default:
    return "unknown";
  }
}

int elementType(const onnx::TypeProto &type) {
  if (!type.has_tensor_type())
    return onnx::TensorProto::UNDEFINED;
  return type.tensor_type().elem_type();
}

llvm::StringMap<const onnx::TypeProto *>
collectValueTypes(const onnx::GraphProto &graph) {
  llvm::StringMap<const onnx::TypeProto *> types;
  for (const onnx::ValueInfoProto &vi : graph.value_info())
    if (vi.has_type())
      types[vi.name()] = &vi.type();
  for (const onnx::ValueInfoProto &vi : graph.output())
    if (vi.has_type())
      types[vi.name()] = &vi.type();
  for (const onnx::ValueInfoProto &vi : graph.input())
    if (vi.has_type())
      types[vi.name()] = &vi.type();
  return types;
}

std::string oneLine(llvm::StringRef message) {
  std::string out;
  bool pendingSpace = false;
  for (char c : message.trim()) {
    if (c == '\n' || c == '\r' || c == '\t' || c == ' ') {
      pendingSpace = true;
      continue;
    }
    if (pendingSpace && !out.empty())
      out += ' ';
    pendingSpace = false;
    out += c;
  }
  return out;
}

} // namespace zinc::frontend
