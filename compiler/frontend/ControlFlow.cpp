//===- ControlFlow.cpp - If nodes whose condition folds, and why others don't -===//
//
// Exporters write shape-dependent Python branches as ONNX If nodes: Llama's
// `squeeze(d)` of a dimension the tracer does not know becomes
// If(Shape(x)[d] == 1, Squeeze, Identity). Once --dim binds the shapes the
// condition folds (ShapeFolding), and the taken branch is inlined here, so
// the rest of the compiler only ever sees straight-line graphs.
//
//===----------------------------------------------------------------------===//
#include "compiler/frontend/ControlFlow.h"
#include "compiler/frontend/OnnxUtil.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

namespace zinc::frontend {

bool isControlFlowOp(const onnx::NodeProto &node) {
  return isDefaultDomain(node.domain()) &&
         (node.op_type() == "If" || node.op_type() == "Loop" ||
          node.op_type() == "Scan");
}

static const onnx::GraphProto *branch(const onnx::NodeProto &node,
                                      bool thenBranch) {
  const char *name = thenBranch ? "then_branch" : "else_branch";
  for (const onnx::AttributeProto &a : node.attribute())
    if (a.name() == name && a.has_g())
      return &a.g();
  return nullptr;
}

int inlineTakenBranches(onnx::GraphProto &graph,
                        const llvm::DenseMap<int, bool> &takenBranch) {
  if (takenBranch.empty())
    return 0;
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  nodes.Swap(graph.mutable_node());
  int inlined = 0;
  for (int index = 0; index < nodes.size(); ++index) {
    onnx::NodeProto &node = nodes[index];
    auto taken = takenBranch.find(index);
    const onnx::GraphProto *body =
        taken == takenBranch.end() ? nullptr : branch(node, taken->second);
    // A branch must yield one value per If output (the checker enforces
    // it); anything else stays, to be refused with its diagnostic.
    if (!body || body->output_size() != node.output_size()) {
      graph.add_node()->Swap(&node);
      continue;
    }
    for (const onnx::TensorProto &init : body->initializer())
      *graph.add_initializer() = init;
    for (const onnx::NodeProto &inner : body->node())
      *graph.add_node() = inner;
    std::string prefix = nodeName(node, index);
    for (int i = 0; i < node.output_size(); ++i) {
      if (node.output(i).empty())
        continue;
      onnx::NodeProto *forward = graph.add_node();
      forward->set_op_type("Identity");
      forward->set_name(prefix + "/branch_output_" + std::to_string(i));
      forward->add_input(body->output(i).name());
      forward->add_output(node.output(i));
    }
    ++inlined;
  }
  return inlined;
}

std::string describeRuntimeCondition(const onnx::GraphProto &graph,
                                     const onnx::NodeProto &node) {
  llvm::StringMap<const onnx::NodeProto *> producer;
  for (const onnx::NodeProto &n : graph.node())
    for (const std::string &out : n.output())
      if (!out.empty())
        producer[out] = &n;
  llvm::StringSet<> initializers;
  for (const onnx::TensorProto &t : graph.initializer())
    initializers.insert(t.name());

  // The condition of an If is input 0; a Loop's trip count and condition
  // are inputs 0 and 1.
  int operands = node.op_type() == "Loop" ? 2 : 1;
  std::string what = node.op_type() == "Loop" ? "trip count or condition"
                                              : "condition";
  llvm::SmallVector<std::string, 8> work;
  std::string first;
  for (int i = 0; i < std::min(operands, node.input_size()); ++i)
    if (!node.input(i).empty()) {
      work.push_back(node.input(i));
      if (first.empty())
        first = node.input(i);
    }
  // Breadth over the producers: the graph inputs the operands come from.
  llvm::StringSet<> seen;
  llvm::SmallVector<std::string, 4> sources;
  while (!work.empty()) {
    std::string name = work.pop_back_val();
    if (!seen.insert(name).second)
      continue;
    auto it = producer.find(name);
    if (it == producer.end()) {
      if (!initializers.count(name))
        sources.push_back(name);
      continue;
    }
    for (const std::string &in : it->second->input())
      if (!in.empty())
        work.push_back(in);
  }
  llvm::sort(sources);
  std::string text = "its " + what + " '" + first + "'";
  if (sources.empty())
    return text + " is not a constant once --dim values are bound and shape "
                  "computations folded";
  text += " is computed at run time from graph input";
  text += sources.size() > 1 ? "s " : " ";
  for (size_t i = 0; i < sources.size(); ++i)
    text += (i ? ", '" : "'") + sources[i] + "'";
  return text + "; zinc compiles straight-line steps and runs no "
                "data-dependent control flow";
}

} // namespace zinc::frontend
