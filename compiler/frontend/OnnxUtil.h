//===- OnnxUtil.h - Small helpers over onnx protos shared by the frontend -===//
//
// Private to compiler/frontend: only the frontend sees onnx's types.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_COMPILER_FRONTEND_ONNXUTIL_H
#define ZINC_COMPILER_FRONTEND_ONNXUTIL_H

#include "onnx/onnx_pb.h"
#include "llvm/ADT/Optional.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include <string>

namespace zinc::frontend {

/// The name diagnostics and the IR use for the node at `index` of its graph:
/// its own name, or "<OpType>_<index>" when it has none, so that unnamed
/// nodes still get stable names.
std::string nodeName(const onnx::NodeProto &node, size_t index);

/// "node 'MatMul_3' (MatMul)", with "domain." before the op type when the
/// node is not in the default domain; matches ir::Node::describe().
std::string describeNode(const onnx::NodeProto &node, size_t index);

/// True for "" and "ai.onnx", the two spellings of the default domain.
bool isDefaultDomain(llvm::StringRef domain);

/// Name of an ONNX element type code: zinc's short name (f32, i64, ...) when
/// zinc has a DType for it, else ONNX's name (string, complex64, ...).
std::string elementTypeName(int onnxCode);

/// The shape of a tensor type when every dimension has a known, non-negative
/// size; None when the type is not a tensor or any dimension is unknown.
llvm::Optional<llvm::SmallVector<int64_t, 4>>
staticShape(const onnx::TypeProto &type);

/// "tensor", "sequence", "map", "optional", "sparse tensor" or "unknown":
/// what kind of value a type describes, for diagnostics.
const char *typeKindName(const onnx::TypeProto &type);

/// Element type code of a tensor type; 0 (UNDEFINED) when unknown or when the
/// type is not a tensor.
int elementType(const onnx::TypeProto &type);

/// The type of every named value onnx knows after shape inference: value_info,
/// graph outputs and graph inputs (later entries win, so a declared input type
/// is what the user wrote).
llvm::StringMap<const onnx::TypeProto *>
collectValueTypes(const onnx::GraphProto &graph);

/// Folds a multi-line message from libonnx into one line, so that every
/// diagnostic stays a single line.
std::string oneLine(llvm::StringRef message);

} // namespace zinc::frontend

#endif
