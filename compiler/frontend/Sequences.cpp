//===- Sequences.cpp - Tensor sequences whose lengths fold, as tensors ----===//
//
// PyTorch exports some tensor list code (repeat_interleave, torch.split in
// a loop) as ONNX sequences built inside a Loop. Once the loop is unrolled
// (ControlFlow.cpp) and sizes fold, every such sequence is a list of tensor
// values known by name, and what reads it becomes plain tensor ops.
//
//===----------------------------------------------------------------------===//
#include "compiler/frontend/Sequences.h"
#include "compiler/frontend/OnnxUtil.h"
#include "compiler/frontend/ProtoBuilding.h"
#include "llvm/ADT/StringSet.h"

namespace zinc::frontend {

using Names = std::vector<std::string>;

/// The most elements a SplitToSequence is folded into.
constexpr int64_t kMaxSequenceElements = int64_t(1) << 16;

static int64_t intAttr(const onnx::NodeProto &n, llvm::StringRef name,
                       int64_t fallback) {
  for (const onnx::AttributeProto &a : n.attribute())
    if (a.name() == name)
      return a.i();
  return fallback;
}

static const ConstantTensor *knownValue(const llvm::StringMap<ConstantTensor> &known,
                                        const std::string &name) {
  auto it = known.find(name);
  return it == known.end() ? nullptr : &it->second;
}

/// The elements of a SplitToSequence of the constant `x`, as Constant nodes
/// (the folder reads them, where a Split's outputs it could not).
static Names constantElements(google::protobuf::RepeatedPtrField<onnx::NodeProto> &out,
                              const ConstantTensor &x, int64_t axis,
                              llvm::ArrayRef<int64_t> sizes, bool keepdims,
                              const std::string &base) {
  int64_t outer = 1, inner = 1, dim = x.dims[axis];
  for (int64_t d = 0; d < int64_t(x.dims.size()); ++d) {
    if (d < axis)
      outer *= x.dims[d];
    if (d > axis)
      inner *= x.dims[d];
  }
  Names parts;
  int64_t start = 0;
  for (size_t k = 0; k < sizes.size(); ++k) {
    llvm::SmallVector<int64_t, 4> dims(x.dims.begin(), x.dims.end());
    dims[axis] = sizes[k];
    if (!keepdims)
      dims.erase(dims.begin() + axis);
    ConstantTensor part = ConstantTensor::make(x.elemType, dims);
    int64_t at = 0;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = start; j < start + sizes[k]; ++j)
        for (int64_t i = 0; i < inner; ++i, ++at) {
          int64_t from = (o * dim + j) * inner + i;
          if (x.isFloat())
            part.setReal(at, x.realAt(from));
          else
            part.setInteger(at, x.integerAt(from));
        }
    start += sizes[k];
    std::string name = base + "/element_" + std::to_string(k);
    appendConstant(out, name, part);
    parts.push_back(name);
  }
  return parts;
}

/// Appends Split (and, without keepdims, Squeezes) giving the elements of
/// SplitToSequence `node`; their names, or an empty list when the sizes are
/// not static.
static Names splitElements(google::protobuf::RepeatedPtrField<onnx::NodeProto> &out,
                           const onnx::NodeProto &node,
                           const llvm::StringMap<ConstantTensor> &known,
                           const llvm::StringMap<const onnx::TypeProto *> &types,
                           int64_t opset) {
  auto type = types.find(node.input(0));
  if (type == types.end())
    return {};
  llvm::Optional<llvm::SmallVector<int64_t, 4>> shape = staticShape(*type->second);
  if (!shape || shape->empty())
    return {};
  int64_t rank = shape->size(), axis = intAttr(node, "axis", 0);
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis >= rank)
    return {};
  int64_t dim = (*shape)[axis];
  // Each element becomes a value of its own: a sequence of more stays
  // unfolded (and is refused).
  if (dim > kMaxSequenceElements)
    return {};
  std::vector<int64_t> sizes;
  bool keepdims = true;
  if (node.input_size() > 1 && !node.input(1).empty()) {
    const ConstantTensor *split = knownValue(known, node.input(1));
    if (!split)
      return {};
    if (split->numElements() == 0)
      return {};
    if (split->dims.empty()) {
      int64_t piece = split->integerAt(0);
      if (piece <= 0)
        return {};
      for (int64_t at = 0; at < dim; at += piece)
        sizes.push_back(std::min(piece, dim - at));
    } else {
      for (int64_t k = 0; k < split->numElements(); ++k)
        sizes.push_back(split->integerAt(k));
    }
  } else {
    sizes.assign(dim, 1);
    keepdims = intAttr(node, "keepdims", 1) != 0;
  }
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0 || s > dim)
      return {};
    total += s;
  }
  if (total != dim || sizes.empty())
    return {};
  std::string base = node.output(0);
  if (const ConstantTensor *x = knownValue(known, node.input(0)))
    return constantElements(out, *x, axis, sizes, keepdims, base);
  Names parts;
  for (size_t k = 0; k < sizes.size(); ++k)
    parts.push_back(base + "/element_" + std::to_string(k) + (keepdims ? "" : "_kept"));
  std::vector<std::string> inputs{node.input(0)};
  if (opset >= 13) {
    std::string sizeName = base + "/element_sizes";
    appendConstant(out, sizeName, int64Tensor(sizes, {int64_t(sizes.size())}));
    inputs.push_back(sizeName);
  }
  onnx::NodeProto *split = appendNode(out, "Split", base + "/elements", inputs, parts);
  setIntAttribute(*split, "axis", axis);
  if (opset < 13) {
    onnx::AttributeProto *a = split->add_attribute();
    a->set_name("split");
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t s : sizes)
      a->add_ints(s);
  }
  if (keepdims)
    return parts;
  Names squeezed;
  std::string axesName = base + "/element_axis";
  if (opset >= 13)
    appendConstant(out, axesName, int64Tensor({axis}, {1}));
  for (size_t k = 0; k < parts.size(); ++k) {
    std::string name = base + "/element_" + std::to_string(k);
    appendAxesOp(out, "Squeeze", name, parts[k], axis, axesName, opset);
    squeezed.push_back(name);
  }
  return squeezed;
}

static bool isSequenceProducer(llvm::StringRef op) {
  return op == "SequenceEmpty" || op == "SequenceConstruct" ||
         op == "SequenceInsert" || op == "SplitToSequence" ||
         op == "SequenceErase";
}

/// Counts every input of `graph`'s nodes into `uses`, subgraphs included:
/// a Loop body still to be unrolled reads outer values by name.
static void countUses(const onnx::GraphProto &graph, llvm::StringMap<int> &uses) {
  for (const onnx::NodeProto &n : graph.node()) {
    for (const std::string &in : n.input())
      ++uses[in];
    for (const onnx::AttributeProto &a : n.attribute()) {
      if (a.has_g())
        countUses(a.g(), uses);
      for (const onnx::GraphProto &g : a.graphs())
        countUses(g, uses);
    }
  }
}

/// Removes sequence-producing nodes (and Identities of sequences) whose
/// outputs nothing reads, last first, so chains go at once.
static bool removeDeadSequences(onnx::GraphProto &graph,
                                const llvm::StringSet<> &sequenceValues) {
  llvm::StringMap<int> uses;
  countUses(graph, uses);
  for (const onnx::ValueInfoProto &o : graph.output())
    ++uses[o.name()];
  std::vector<bool> dead(graph.node_size(), false);
  bool any = false;
  for (int i = graph.node_size(); i-- > 0;) {
    const onnx::NodeProto &n = graph.node(i);
    bool sequenceNode = isDefaultDomain(n.domain()) &&
                        (isSequenceProducer(n.op_type()) ||
                         (n.op_type() == "Identity" && n.input_size() == 1 &&
                          sequenceValues.count(n.input(0))));
    if (!sequenceNode || n.output_size() != 1 || uses.lookup(n.output(0)) > 0)
      continue;
    dead[i] = true;
    any = true;
    for (const std::string &in : n.input())
      --uses[in];
  }
  if (!any)
    return false;
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  nodes.Swap(graph.mutable_node());
  for (int i = 0; i < nodes.size(); ++i)
    if (!dead[i])
      graph.add_node()->Swap(&nodes[i]);
  return true;
}

bool foldSequences(onnx::GraphProto &graph,
                   const llvm::StringMap<ConstantTensor> &known,
                   const llvm::StringMap<const onnx::TypeProto *> &types,
                   int64_t opset) {
  bool hasSequences = false;
  for (const onnx::NodeProto &n : graph.node())
    hasSequences |= isDefaultDomain(n.domain()) &&
                    (isSequenceProducer(n.op_type()) ||
                     n.op_type() == "SequenceAt" ||
                     n.op_type() == "ConcatFromSequence" ||
                     n.op_type() == "SequenceLength");
  if (!hasSequences)
    return false;

  llvm::StringMap<Names> sequences;
  llvm::StringSet<> sequenceValues;
  // Values an earlier round defined: the elements it gave a SplitToSequence
  // are named <sequence>/element_<k>.
  llvm::StringSet<> defined;
  for (const onnx::NodeProto &n : graph.node())
    for (const std::string &o : n.output())
      defined.insert(o);
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  nodes.Swap(graph.mutable_node());
  auto &out = *graph.mutable_node();
  bool changed = false;
  for (int index = 0; index < nodes.size(); ++index) {
    onnx::NodeProto &node = nodes[index];
    llvm::StringRef op = node.op_type();
    auto seqOf = [&](int i) -> const Names * {
      if (i >= node.input_size())
        return nullptr;
      auto it = sequences.find(node.input(i));
      return it == sequences.end() ? nullptr : &it->second;
    };
    std::string name = nodeName(node, index);
    if (!isDefaultDomain(node.domain()) || node.output_size() != 1) {
      out.Add()->Swap(&node);
      continue;
    }
    const std::string result = node.output(0);
    if (op == "SequenceEmpty") {
      sequences[result] = {};
    } else if (op == "SequenceConstruct") {
      sequences[result] = Names(node.input().begin(), node.input().end());
    } else if (op == "Identity" && seqOf(0)) {
      sequences[result] = *seqOf(0);
    } else if (op == "SequenceInsert" && seqOf(0)) {
      Names list = *seqOf(0);
      int64_t at = list.size();
      bool ok = true;
      if (node.input_size() > 2 && !node.input(2).empty()) {
        const ConstantTensor *pos = knownValue(known, node.input(2));
        ok = pos && pos->numElements() == 1;
        if (ok) {
          at = pos->integerAt(0);
          at = at < 0 ? at + int64_t(list.size()) : at;
          ok = at >= 0 && at <= int64_t(list.size());
        }
      }
      if (ok) {
        list.insert(list.begin() + at, node.input(1));
        sequences[result] = list;
      }
    } else if (op == "SplitToSequence") {
      // The elements are made once; a later round finds them by name.
      if (defined.count(result + "/element_0")) {
        Names parts;
        for (size_t k = 0; defined.count(result + "/element_" + std::to_string(k)); ++k)
          parts.push_back(result + "/element_" + std::to_string(k));
        sequences[result] = parts;
      } else {
        Names parts = splitElements(out, node, known, types, opset);
        if (!parts.empty()) {
          sequences[result] = parts;
          changed = true;
        }
      }
    } else if (op == "SequenceAt" && seqOf(0)) {
      const Names &list = *seqOf(0);
      const ConstantTensor *pos =
          node.input_size() > 1 ? knownValue(known, node.input(1)) : nullptr;
      if (pos && pos->numElements() != 1)
        pos = nullptr;
      int64_t at = pos ? pos->integerAt(0) : -int64_t(list.size()) - 1;
      at = at < 0 ? at + int64_t(list.size()) : at;
      if (pos && at >= 0 && at < int64_t(list.size())) {
        appendNode(out, "Identity", name, {list[at]}, {result});
        changed = true;
        continue;
      }
    } else if (op == "SequenceLength" && seqOf(0)) {
      appendConstant(out, result, int64Tensor({int64_t(seqOf(0)->size())}, {}));
      changed = true;
      continue;
    } else if (op == "ConcatFromSequence" && seqOf(0) && !seqOf(0)->empty()) {
      Names parts = *seqOf(0);
      int64_t axis = intAttr(node, "axis", 0);
      if (intAttr(node, "new_axis", 0) != 0) {
        std::string axesName = name + "/new_axis";
        if (opset >= 13)
          appendConstant(out, axesName, int64Tensor({axis}, {1}));
        for (size_t k = 0; k < parts.size(); ++k) {
          std::string row = name + "/element_" + std::to_string(k);
          appendAxesOp(out, "Unsqueeze", row, parts[k], axis, axesName, opset);
          parts[k] = row;
        }
      }
      onnx::NodeProto *cat = appendNode(out, "Concat", name, parts, {result});
      setIntAttribute(*cat, "axis", axis);
      changed = true;
      continue;
    }
    if (sequences.count(result))
      sequenceValues.insert(result);
    out.Add()->Swap(&node);
  }
  return removeDeadSequences(graph, sequenceValues) || changed;
}

} // namespace zinc::frontend
