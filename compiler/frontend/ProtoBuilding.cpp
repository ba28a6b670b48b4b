//===- ProtoBuilding.cpp - Small builders of onnx nodes for the folders ---===//
#include "compiler/frontend/ProtoBuilding.h"

namespace zinc::frontend {

onnx::NodeProto *appendNode(google::protobuf::RepeatedPtrField<onnx::NodeProto> &nodes,
                            llvm::StringRef op, llvm::StringRef name,
                            llvm::ArrayRef<std::string> inputs,
                            llvm::ArrayRef<std::string> outputs) {
  onnx::NodeProto *node = nodes.Add();
  node->set_op_type(op.str());
  node->set_name(name.str());
  for (const std::string &in : inputs)
    node->add_input(in);
  for (const std::string &out : outputs)
    node->add_output(out);
  return node;
}

void appendConstant(google::protobuf::RepeatedPtrField<onnx::NodeProto> &nodes,
                    const std::string &output, const ConstantTensor &value) {
  onnx::NodeProto *node = appendNode(nodes, "Constant", output, {}, {output});
  onnx::AttributeProto *attr = node->add_attribute();
  attr->set_name("value");
  attr->set_type(onnx::AttributeProto::TENSOR);
  *attr->mutable_t() = value.toProto(output);
}

ConstantTensor int64Tensor(llvm::ArrayRef<int64_t> values,
                           llvm::ArrayRef<int64_t> dims) {
  ConstantTensor t = ConstantTensor::make(onnx::TensorProto::INT64, dims);
  t.ints.assign(values.begin(), values.end());
  return t;
}

onnx::NodeProto *appendAxesOp(google::protobuf::RepeatedPtrField<onnx::NodeProto> &nodes,
                              llvm::StringRef op, const std::string &name,
                              const std::string &input, int64_t axis,
                              const std::string &axesName, int64_t opset) {
  std::vector<std::string> inputs{input};
  if (opset >= 13)
    inputs.push_back(axesName);
  onnx::NodeProto *node = appendNode(nodes, op, name, inputs, {name});
  if (opset < 13) {
    onnx::AttributeProto *a = node->add_attribute();
    a->set_name("axes");
    a->set_type(onnx::AttributeProto::INTS);
    a->add_ints(axis);
  }
  return node;
}

void setIntAttribute(onnx::NodeProto &node, llvm::StringRef name, int64_t value) {
  onnx::AttributeProto *attr = node.add_attribute();
  attr->set_name(name.str());
  attr->set_type(onnx::AttributeProto::INT);
  attr->set_i(value);
}

} // namespace zinc::frontend
