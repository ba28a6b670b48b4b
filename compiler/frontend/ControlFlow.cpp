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
#include "compiler/frontend/ProtoBuilding.h"
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

/// Whether the Loop body's condition output is its condition input, or a
/// known true value, passed on through Cast and Identity only.
static bool conditionStaysTrue(const onnx::GraphProto &body,
                               const llvm::StringMap<ConstantTensor> &known) {
  llvm::StringMap<const onnx::NodeProto *> producer;
  for (const onnx::NodeProto &n : body.node())
    for (const std::string &out : n.output())
      producer[out] = &n;
  std::string v = body.output(0).name();
  for (int step = 0; step <= body.node_size(); ++step) {
    if (v == body.input(1).name())
      return true;
    auto it = producer.find(v);
    if (it == producer.end()) {
      auto k = known.find(v);
      return k != known.end() && k->second.numElements() == 1 &&
             k->second.realAt(0) != 0;
    }
    const onnx::NodeProto &n = *it->second;
    if ((n.op_type() != "Cast" && n.op_type() != "Identity") ||
        n.input_size() != 1)
      return false;
    v = n.input(0);
  }
  return false;
}

/// The trip count of a Loop that can be unrolled, or -1.
static int64_t unrollableTrips(const onnx::NodeProto &node,
                               const llvm::StringMap<ConstantTensor> &known) {
  if (!isDefaultDomain(node.domain()) || node.op_type() != "Loop" ||
      node.input_size() < 2 || node.input(0).empty())
    return -1;
  const onnx::GraphProto *body = nullptr;
  for (const onnx::AttributeProto &a : node.attribute())
    if (a.name() == "body" && a.has_g())
      body = &a.g();
  int carried = node.input_size() - 2;
  if (!body || body->initializer_size() > 0 ||
      body->input_size() != carried + 2 || body->output_size() < carried + 1 ||
      node.output_size() != body->output_size() - 1)
    return -1;
  for (const onnx::NodeProto &n : body->node())
    for (const onnx::AttributeProto &a : n.attribute())
      if (a.has_g() || a.graphs_size() > 0)
        return -1;
  auto trips = known.find(node.input(0));
  if (trips == known.end() || trips->second.numElements() != 1)
    return -1;
  int64_t count = trips->second.integerAt(0);
  if (count < 0 || count > kMaxUnrolledIterations)
    return -1;
  // A model's size stays bounded: the copies together hold at most
  // kMaxUnrolledNodes nodes.
  if (count * std::max(body->node_size(), 1) > kMaxUnrolledNodes)
    return -1;
  if (!node.input(1).empty()) {
    auto cond = known.find(node.input(1));
    if (cond == known.end() || cond->second.numElements() != 1 ||
        cond->second.realAt(0) == 0)
      return -1;
  }
  // Scan outputs are stacked: at least one iteration must give their shape.
  if (node.output_size() > carried && count == 0)
    return -1;
  return conditionStaysTrue(*body, known) ? count : -1;
}

int unrollConstantLoops(onnx::GraphProto &graph,
                        const llvm::StringMap<ConstantTensor> &known,
                        int64_t opset) {
  // Every fold round calls this: a graph with nothing to unroll is left
  // untouched, not rebuilt.
  if (llvm::none_of(graph.node(), [&](const onnx::NodeProto &n) {
        return unrollableTrips(n, known) >= 0;
      }))
    return 0;
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  nodes.Swap(graph.mutable_node());
  auto &out = *graph.mutable_node();
  int unrolled = 0;
  for (int index = 0; index < nodes.size(); ++index) {
    onnx::NodeProto &node = nodes[index];
    int64_t trips = unrollableTrips(node, known);
    if (trips < 0) {
      out.Add()->Swap(&node);
      continue;
    }
    const onnx::GraphProto *body = nullptr;
    for (const onnx::AttributeProto &a : node.attribute())
      if (a.name() == "body")
        body = &a.g();
    int carried = node.input_size() - 2;
    int scans = node.output_size() - carried;
    std::string prefix = nodeName(node, index);
    std::vector<std::string> current(node.input().begin() + 2,
                                     node.input().end());
    std::vector<std::vector<std::string>> scanned(scans);
    for (int64_t i = 0; i < trips; ++i) {
      std::string suffix = "/iteration_" + std::to_string(i);
      llvm::StringMap<std::string> rename;
      std::string number = prefix + suffix + "/number";
      appendConstant(out, number, int64Tensor({i}, {}));
      rename[body->input(0).name()] = number;
      std::string cond = prefix + suffix + "/condition";
      ConstantTensor yes = ConstantTensor::make(onnx::TensorProto::BOOL, {});
      yes.ints[0] = 1;
      appendConstant(out, cond, yes);
      rename[body->input(1).name()] = cond;
      for (int k = 0; k < carried; ++k)
        rename[body->input(2 + k).name()] = current[k];
      auto renamed = [&](const std::string &name) {
        auto it = rename.find(name);
        return it == rename.end() ? name : it->second;
      };
      for (const onnx::NodeProto &inner : body->node()) {
        onnx::NodeProto *copy = out.Add();
        *copy = inner;
        copy->set_name((inner.name().empty() ? inner.op_type() : inner.name()) +
                       suffix);
        for (int j = 0; j < copy->input_size(); ++j)
          if (!copy->input(j).empty())
            copy->set_input(j, renamed(copy->input(j)));
        for (int j = 0; j < copy->output_size(); ++j)
          if (!copy->output(j).empty()) {
            std::string fresh = copy->output(j) + suffix;
            rename[copy->output(j)] = fresh;
            copy->set_output(j, fresh);
          }
      }
      for (int k = 0; k < carried; ++k)
        current[k] = renamed(body->output(1 + k).name());
      for (int s = 0; s < scans; ++s)
        scanned[s].push_back(renamed(body->output(1 + carried + s).name()));
    }
    for (int k = 0; k < carried; ++k)
      if (!node.output(k).empty())
        appendNode(out, "Identity", prefix + "/carried_" + std::to_string(k),
                   {current[k]}, {node.output(k)});
    std::string axes = prefix + "/scan_axes";
    if (scans > 0 && opset >= 13)
      appendConstant(out, axes, int64Tensor({0}, {1}));
    for (int s = 0; s < scans; ++s) {
      if (node.output(carried + s).empty())
        continue;
      std::vector<std::string> rows;
      for (size_t i = 0; i < scanned[s].size(); ++i) {
        std::string row = prefix + "/scan_" + std::to_string(s) + "_row_" +
                          std::to_string(i);
        appendAxesOp(out, "Unsqueeze", row, scanned[s][i], 0, axes, opset);
        rows.push_back(row);
      }
      onnx::NodeProto *cat =
          appendNode(out, "Concat", prefix + "/scan_" + std::to_string(s),
                     rows, {node.output(carried + s)});
      setIntAttribute(*cat, "axis", 0);
    }
    ++unrolled;
  }
  return unrolled;
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
