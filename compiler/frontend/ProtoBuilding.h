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

/// Sets an int attribute on `node`.
void setIntAttribute(onnx::NodeProto &node, llvm::StringRef name, int64_t value);

} // namespace zinc::frontend

#endif
