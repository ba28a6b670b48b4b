//===- ProtoBuilding.h - Small builders of onnx nodes for the folders -----===//
#ifndef ZINC_COMPILER_FRONTEND_PROTOBUILDING_H
#define ZINC_COMPILER_FRONTEND_PROTOBUILDING_H

#include "compiler/frontend/ConstantTensor.h"
#include "onnx/onnx_pb.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include <string>

namespace zinc::frontend {

/// Appends a node `op`(inputs) -> outputs named `name` to `nodes`.
onnx::NodeProto *appendNode(google::protobuf::RepeatedPtrField<onnx::NodeProto> &nodes,
                            llvm::StringRef op, llvm::StringRef name,
                            llvm::ArrayRef<std::string> inputs,
                            llvm::ArrayRef<std::string> outputs);

/// Appends a Constant node defining `output` as `value`.
void appendConstant(google::protobuf::RepeatedPtrField<onnx::NodeProto> &nodes,
                    const std::string &output, const ConstantTensor &value);

/// An int64 ConstantTensor holding `values` with dims `dims`.
ConstantTensor int64Tensor(llvm::ArrayRef<int64_t> values,
                           llvm::ArrayRef<int64_t> dims);

/// Appends `op` (Squeeze or Unsqueeze) of `input` along `axis`, named
/// `name`: from opset 13 the axes are the input `axesName`, which the caller
/// defines once (an int64[1] Constant of `axis`); an attribute before.
onnx::NodeProto *appendAxesOp(google::protobuf::RepeatedPtrField<onnx::NodeProto> &nodes,
                              llvm::StringRef op, const std::string &name,
                              const std::string &input, int64_t axis,
                              const std::string &axesName, int64_t opset);

/// Sets an int attribute on `node`.
void setIntAttribute(onnx::NodeProto &node, llvm::StringRef name, int64_t value);

} // namespace zinc::frontend

#endif
