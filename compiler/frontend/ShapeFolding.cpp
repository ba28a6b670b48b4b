//===- ShapeFolding.cpp - Folds shape computations to constants -----------===//
//
// PyTorch exports with dynamic axes compute sizes at run time: x.size(1)
// becomes Shape -> Gather, torch.arange(0, t) becomes Range over it, and
// view(B, T, H, D) becomes a Reshape whose target is a Concat of such
// scalars. Once --dim has bound every input dimension, all of these are
// constants; folding them is what makes every shape in the IR static.
//
//===----------------------------------------------------------------------===//
#include "compiler/frontend/ShapeFolding.h"
#include "compiler/frontend/ConstantEvaluator.h"
#include "compiler/frontend/ConstantTensor.h"
#include "compiler/frontend/ControlFlow.h"
#include "compiler/frontend/Sequences.h"
#include "compiler/frontend/OnnxUtil.h"

namespace zinc::frontend {

using TP = onnx::TensorProto;

/// The value a Constant node holds, from whichever of its attributes is set.
static llvm::Optional<ConstantTensor>
constantValue(const onnx::NodeProto &node) {
  for (const onnx::AttributeProto &a : node.attribute()) {
    if (a.name() == "value" && a.has_t())
      return ConstantTensor::fromProto(a.t());
    if (a.name() == "value_int" || a.name() == "value_ints") {
      bool scalar = a.name() == "value_int";
      ConstantTensor t = ConstantTensor::make(
          TP::INT64, scalar ? llvm::ArrayRef<int64_t>()
                            : llvm::ArrayRef<int64_t>{a.ints_size()});
      if (scalar)
        t.ints[0] = a.i();
      else
        t.ints.assign(a.ints().begin(), a.ints().end());
      return t;
    }
    if (a.name() == "value_float" || a.name() == "value_floats") {
      bool scalar = a.name() == "value_float";
      ConstantTensor t = ConstantTensor::make(
          TP::FLOAT, scalar ? llvm::ArrayRef<int64_t>()
                            : llvm::ArrayRef<int64_t>{a.floats_size()});
      if (scalar)
        t.reals[0] = a.f();
      else
        t.reals.assign(a.floats().begin(), a.floats().end());
      return t;
    }
  }
  return llvm::None;
}

/// Shape (with opset 15's start/end) or Size of a value whose type is static.
static llvm::Optional<ConstantTensor>
shapeOf(const onnx::NodeProto &node,
        const llvm::StringMap<const onnx::TypeProto *> &types) {
  if (node.input_size() < 1)
    return llvm::None;
  auto it = types.find(node.input(0));
  if (it == types.end())
    return llvm::None;
  llvm::Optional<llvm::SmallVector<int64_t, 4>> dims = staticShape(*it->second);
  if (!dims)
    return llvm::None;
  if (node.op_type() == "Size") {
    ConstantTensor t = ConstantTensor::make(TP::INT64, {});
    t.ints[0] = 1;
    for (int64_t d : *dims)
      t.ints[0] *= d;
    return t;
  }
  int64_t rank = dims->size(), start = 0, end = rank;
  for (const onnx::AttributeProto &a : node.attribute()) {
    if (a.name() == "start")
      start = a.i();
    if (a.name() == "end")
      end = a.i();
  }
  auto clampAxis = [rank](int64_t axis) {
    if (axis < 0)
      axis += rank;
    return std::clamp<int64_t>(axis, 0, rank);
  };
  start = clampAxis(start);
  end = std::max(clampAxis(end), start);
  ConstantTensor t = ConstantTensor::make(TP::INT64, {end - start});
  for (int64_t i = start; i < end; ++i)
    t.ints[i - start] = (*dims)[i];
  return t;
}

/// Makes `node` a Constant node holding `value`, keeping its output and its
/// name (an unnamed node is named after what it was, "Concat_9", so that the
/// IR still says where a constant came from).
static void replaceWithConstant(onnx::NodeProto &node, size_t index,
                                const ConstantTensor &value) {
  if (node.name().empty())
    node.set_name(nodeName(node, index));
  std::string output = node.output(0);
  node.clear_input();
  node.clear_output();
  node.add_output(output);
  node.clear_attribute();
  node.clear_domain();
  node.set_op_type("Constant");
  onnx::AttributeProto *attr = node.add_attribute();
  attr->set_name("value");
  attr->set_type(onnx::AttributeProto::TENSOR);
  *attr->mutable_t() = value.toProto(output);
}

bool foldShapeComputations(
    onnx::GraphProto &graph, int64_t opset,
    const llvm::StringMap<const onnx::TypeProto *> &types) {
  llvm::StringMap<ConstantTensor> known;
  for (const TP &init : graph.initializer()) {
    // Float initializers are parameters, whatever they feed.
    if (ConstantTensor::isFloatType(init.data_type()))
      continue;
    if (llvm::Optional<ConstantTensor> t = ConstantTensor::fromProto(init))
      if (t->numElements() <= kMaxFoldedElements)
        known[init.name()] = std::move(*t);
  }

  bool changed = false;
  llvm::DenseMap<int, bool> takenBranch;
  for (int index = 0; index < graph.node_size(); ++index) {
    onnx::NodeProto &node = *graph.mutable_node(index);
    if (isDefaultDomain(node.domain()) && node.op_type() == "If" &&
        node.input_size() == 1) {
      auto cond = known.find(node.input(0));
      if (cond != known.end() && cond->second.numElements() == 1)
        takenBranch[index] = cond->second.realAt(0) != 0;
      continue;
    }
    if (!isDefaultDomain(node.domain()) || node.output_size() != 1 ||
        node.output(0).empty())
      continue;
    llvm::StringRef op = node.op_type();
    if (op == "Constant") {
      if (llvm::Optional<ConstantTensor> t = constantValue(node))
        known[node.output(0)] = std::move(*t);
      continue;
    }
    llvm::Optional<ConstantTensor> value;
    if (op == "Shape" || op == "Size") {
      value = shapeOf(node, types);
    } else if (canEvaluate(op)) {
      llvm::SmallVector<const ConstantTensor *, 4> inputs;
      bool allKnown = true;
      for (const std::string &name : node.input()) {
        if (name.empty()) {
          inputs.push_back(nullptr);
          continue;
        }
        auto it = known.find(name);
        if (it == known.end()) {
          allKnown = false;
          break;
        }
        inputs.push_back(&it->second);
      }
      if (allKnown)
        value = evaluateNode(node, inputs, opset, kMaxFoldedElements);
    }
    if (!value)
      continue;
    replaceWithConstant(node, index, *value);
    known[node.output(0)] = std::move(*value);
    changed = true;
  }
  // After the walk: inlining and unrolling renumber the nodes the walk
  // indexes.
  if (inlineTakenBranches(graph, takenBranch) > 0)
    changed = true;
  if (unrollConstantLoops(graph, known, opset) > 0)
    changed = true;
  if (foldSequences(graph, known, types, opset))
    changed = true;
  return changed;
}

} // namespace zinc::frontend
