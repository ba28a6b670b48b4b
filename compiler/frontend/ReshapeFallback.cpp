//===- ReshapeFallback.cpp - Reshape shapes onnx 1.12 leaves unknown ------===//
#include "compiler/frontend/ReshapeFallback.h"
#include "compiler/frontend/OnnxUtil.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/Optional.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"

namespace zinc::frontend {

/// Reshape's rules: 0 copies the input dimension (unless allowzero), -1
/// takes what is left. None when the target is inconsistent with the input;
/// onnx's checks or the static-shape error then report the node.
static llvm::Optional<llvm::SmallVector<int64_t, 4>>
reshapeTarget(llvm::ArrayRef<int64_t> input, llvm::ArrayRef<int64_t> target,
              bool allowZero) {
  llvm::SmallVector<int64_t, 4> out;
  int inferred = -1;
  int64_t known = 1;
  for (size_t i = 0; i < target.size(); ++i) {
    int64_t d = target[i];
    if (d == 0 && !allowZero) {
      if (i >= input.size())
        return llvm::None;
      d = input[i];
    } else if (d == -1) {
      if (inferred >= 0)
        return llvm::None;
      inferred = i;
      out.push_back(-1);
      continue;
    } else if (d < 0) {
      return llvm::None;
    }
    known *= d;
    out.push_back(d);
  }
  int64_t total = 1;
  for (int64_t d : input)
    total *= d;
  if (inferred >= 0) {
    if (known == 0 || total % known)
      return llvm::None;
    out[inferred] = total / known;
  } else if (known != total) {
    return llvm::None;
  }
  return out;
}

bool inferReshapesFromPropagatedData(onnx::GraphProto &graph,
                                     const PropagatedData &data) {
  llvm::StringMap<const onnx::TypeProto *> types = collectValueTypes(graph);
  bool changed = false;
  for (const onnx::NodeProto &node : graph.node()) {
    if (node.op_type() != "Reshape" || !isDefaultDomain(node.domain()) ||
        node.input_size() != 2 || node.output_size() != 1)
      continue;
    const std::string &out = node.output(0);
    auto outType = types.find(out);
    if (outType != types.end() && staticShape(*outType->second))
      continue;
    auto inType = types.find(node.input(0));
    if (inType == types.end())
      continue;
    llvm::Optional<llvm::SmallVector<int64_t, 4>> input =
        staticShape(*inType->second);
    auto target = data.find(node.input(1));
    if (!input || target == data.end())
      continue;
    llvm::SmallVector<int64_t, 4> dims;
    for (const auto &d : target->second.dim()) {
      if (!d.has_dim_value())
        break;
      dims.push_back(d.dim_value());
    }
    if (dims.size() != static_cast<size_t>(target->second.dim_size()))
      continue;
    bool allowZero = false;
    for (const onnx::AttributeProto &a : node.attribute())
      if (a.name() == "allowzero")
        allowZero = a.i() != 0;
    llvm::Optional<llvm::SmallVector<int64_t, 4>> shape =
        reshapeTarget(*input, dims, allowZero);
    if (!shape)
      continue;

    onnx::ValueInfoProto *vi = nullptr;
    for (onnx::ValueInfoProto &existing : *graph.mutable_value_info())
      if (existing.name() == out)
        vi = &existing;
    for (onnx::ValueInfoProto &existing : *graph.mutable_output())
      if (existing.name() == out)
        vi = &existing;
    if (!vi) {
      vi = graph.add_value_info();
      vi->set_name(out);
    }
    onnx::TypeProto_Tensor *tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elementType(*inType->second));
    tt->clear_shape();
    onnx::TensorShapeProto *s = tt->mutable_shape();
    for (int64_t d : *shape)
      s->add_dim()->set_dim_value(d);
    changed = true;
    // `types` may now point at a moved ValueInfoProto: collect again.
    types = collectValueTypes(graph);
  }
  return changed;
}

} // namespace zinc::frontend
