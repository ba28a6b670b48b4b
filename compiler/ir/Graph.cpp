//===- Graph.cpp - Ownership and editing of zinc's IR graph ---------------===//
#include "zinc/ir/Graph.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/Twine.h"
#include <algorithm>
#include <cassert>

namespace zinc::ir {

llvm::StringRef roleName(ValueRole r) {
  switch (r) {
  case ValueRole::Input: return "input";
  case ValueRole::Parameter: return "param";
  case ValueRole::Constant: return "const";
  case ValueRole::Activation: return "act";
  case ValueRole::State: return "state";
  case ValueRole::ModelState: return "model_state";
  }
  return "?";
}

llvm::StringRef tierName(Tier t) {
  switch (t) {
  case Tier::Gpu: return "gpu";
  case Tier::Cpu: return "cpu";
  case Tier::Nvme: return "nvme";
  }
  return "?";
}

llvm::Optional<Tier> parseTierName(llvm::StringRef name) {
  for (Tier t : {Tier::Gpu, Tier::Cpu, Tier::Nvme})
    if (tierName(t) == name)
      return t;
  return llvm::None;
}

llvm::StringRef streamName(Stream s) {
  switch (s) {
  case Stream::Compute: return "compute";
  case Stream::H2D: return "h2d";
  case Stream::D2H: return "d2h";
  case Stream::Nvme: return "nvme";
  case Stream::Collective: return "collective";
  case Stream::Host: return "host";
  }
  return "?";
}

llvm::Optional<Stream> parseStreamName(llvm::StringRef name) {
  for (Stream s : {Stream::Compute, Stream::H2D, Stream::D2H, Stream::Nvme,
                   Stream::Collective, Stream::Host})
    if (streamName(s) == name)
      return s;
  return llvm::None;
}

std::string Node::describe() const {
  return "node '" + name + "' (" + (domain.empty() ? "" : domain + ".") +
         opType + ")";
}

Value *Graph::addValue(llvm::StringRef valueName, DType dtype,
                       llvm::ArrayRef<int64_t> shape, ValueRole role) {
  assert(!valuesByName.count(valueName) && "duplicate value name");
  auto v = std::make_unique<Value>();
  v->id = nextValueId++;
  v->name = valueName.str();
  v->dtype = dtype;
  v->shape.assign(shape.begin(), shape.end());
  v->role = role;
  Value *raw = v.get();
  valuesByName[valueName] = raw;
  valueList.push_back(std::move(v));
  return raw;
}

Node *Graph::addNode(llvm::StringRef opType, llvm::StringRef nodeName,
                     llvm::ArrayRef<Value *> inputs,
                     llvm::ArrayRef<Value *> outputs, AttributeList attrs,
                     llvm::StringRef domain) {
  return insertNode(nullptr, opType, nodeName, inputs, outputs,
                    std::move(attrs), domain);
}

Node *Graph::insertNode(Node *pos, llvm::StringRef opType,
                        llvm::StringRef nodeName,
                        llvm::ArrayRef<Value *> inputs,
                        llvm::ArrayRef<Value *> outputs, AttributeList attrs,
                        llvm::StringRef domain) {
  auto n = std::make_unique<Node>();
  n->id = nextNodeId++;
  n->name = nodeName.str();
  n->domain = domain.str();
  n->opType = opType.str();
  n->inputs.assign(inputs.begin(), inputs.end());
  n->outputs.assign(outputs.begin(), outputs.end());
  n->attrs = std::move(attrs);
  for (Value *out : n->outputs)
    if (out)
      out->def = n.get();
  Node *raw = n.get();
  ++nodeNameCounts[raw->name];
  auto it = nodeList.end();
  if (pos)
    it = std::find_if(nodeList.begin(), nodeList.end(),
                      [&](const std::unique_ptr<Node> &x) { return x.get() == pos; });
  nodeList.insert(it, std::move(n));
  return raw;
}

void Graph::eraseNode(Node *n) {
  auto count = nodeNameCounts.find(n->name);
  if (count != nodeNameCounts.end() && --count->second == 0)
    nodeNameCounts.erase(count);
  for (Value *out : n->outputs)
    if (out && out->def == n)
      out->def = nullptr;
  nodeList.erase(std::find_if(
      nodeList.begin(), nodeList.end(),
      [&](const std::unique_ptr<Node> &x) { return x.get() == n; }));
}

void Graph::eraseDeadValues() {
  llvm::DenseSet<const Value *> live;
  for (Value *v : inputList)
    live.insert(v);
  for (Value *v : outputList)
    live.insert(v);
  for (const auto &n : nodeList) {
    for (Value *v : n->inputs)
      live.insert(v);
    for (Value *v : n->outputs)
      live.insert(v);
  }
  std::vector<std::unique_ptr<Value>> kept;
  for (auto &v : valueList) {
    if (live.count(v.get()))
      kept.push_back(std::move(v));
    else
      valuesByName.erase(v->name);
  }
  valueList = std::move(kept);
}

Value *Graph::lookupValue(llvm::StringRef valueName) const {
  auto it = valuesByName.find(valueName);
  return it == valuesByName.end() ? nullptr : it->second;
}

std::string Graph::uniqueValueName(llvm::StringRef base) const {
  if (!valuesByName.count(base))
    return base.str();
  for (unsigned i = 1;; ++i) {
    std::string candidate = (base + "." + llvm::Twine(i)).str();
    if (!valuesByName.count(candidate))
      return candidate;
  }
}

std::string Graph::uniqueNodeName(llvm::StringRef base) const {
  if (!nodeNameCounts.count(base))
    return base.str();
  for (unsigned i = 1;; ++i) {
    std::string candidate = (base + "." + llvm::Twine(i)).str();
    if (!nodeNameCounts.count(candidate))
      return candidate;
  }
}

std::vector<Value *> Graph::initializers() const {
  std::vector<Value *> out;
  for (const auto &v : valueList)
    if (v->init)
      out.push_back(v.get());
  return out;
}

} // namespace zinc::ir
