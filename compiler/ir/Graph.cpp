//===- Graph.cpp - Ownership and editing of zinc's IR graph ---------------===//
#include "zinc/ir/Graph.h"
#include "llvm/ADT/DenseMap.h"
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

Node::~Node() {
  for (unsigned i = 0; i < inputs.size(); ++i)
    dropUse(i);
}

Graph::~Graph() {
  for (Node &n : nodeList)
    n.forgetInputs();
}

void Node::addUse(unsigned i) {
  Value *v = inputs.list[i];
  if (!v)
    return;
  inputs.slot[i] = v->useList.size();
  v->useList.push_back(Use{this, i});
}

void Node::dropUse(unsigned i) {
  Value *v = inputs.list[i];
  if (!v)
    return;
  // Swap with the last use and pop: O(1); the moved use learns its slot.
  unsigned at = inputs.slot[i];
  Use moved = v->useList.back();
  v->useList[at] = moved;
  moved.user->inputs.slot[moved.operand] = at;
  v->useList.pop_back();
}

void Node::setInput(unsigned i, Value *v) {
  assert(i < inputs.size() && "input index out of range");
  if (inputs.list[i] == v)
    return;
  dropUse(i);
  inputs.list[i] = v;
  addUse(i);
}

void Node::setInputs(llvm::ArrayRef<Value *> values) {
  for (unsigned i = 0; i < inputs.size(); ++i)
    dropUse(i);
  inputs.list.assign(values.begin(), values.end());
  inputs.slot.assign(values.size(), 0);
  for (unsigned i = 0; i < inputs.size(); ++i)
    addUse(i);
}

bool Node::replaceUsesOfWith(Value *from, Value *to) {
  bool any = false;
  for (unsigned i = 0; i < inputs.size(); ++i)
    if (inputs[i] == from) {
      setInput(i, to);
      any = true;
    }
  return any;
}

Value *Graph::addValue(llvm::StringRef valueName, DType dtype,
                       llvm::ArrayRef<int64_t> shape, ValueRole role) {
  assert(!valuesByName.count(valueName) && "duplicate value name");
  ValuePtr v(new (arena->Allocate<Value>()) Value());
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
  Node *n = insertUncounted(pos, opType, nodeName, inputs, outputs,
                            std::move(attrs), domain);
  ++nodeNameCounts[n->name];
  return n;
}

Node *Graph::insertUncounted(Node *pos, llvm::StringRef opType,
                             llvm::StringRef nodeName,
                             llvm::ArrayRef<Value *> inputs,
                             llvm::ArrayRef<Value *> outputs,
                             AttributeList attrs, llvm::StringRef domain) {
  auto *n = new (arena->Allocate<Node>()) Node();
  n->id = nextNodeId++;
  n->name = nodeName.str();
  n->domain = domain.str();
  n->opType = opType.str();
  n->setInputs(inputs);
  n->outputs.assign(outputs.begin(), outputs.end());
  n->attrs = std::move(attrs);
  for (Value *out : n->outputs)
    if (out)
      out->def = n;
  nodeList.insert(pos ? pos->getIterator() : nodeList.end(), n);
  ++nodeCount;
  return n;
}

void Graph::moveBefore(Node *n, Node *pos) {
  if (n == pos)
    return;
  nodeList.splice(pos ? pos->getIterator() : nodeList.end(), nodeList,
                  n->getIterator());
}

void Graph::eraseNode(Node *n) {
  auto count = nodeNameCounts.find(n->name);
  if (count != nodeNameCounts.end() && --count->second == 0)
    nodeNameCounts.erase(count);
  for (Value *out : n->outputs)
    if (out && out->def == n)
      out->def = nullptr;
  nodeList.erase(n->getIterator()); // Deletes it; ~Node drops its uses.
  --nodeCount;
}

void Graph::replaceAllUsesWith(Value *from, Value *to) {
  // Each setInput takes a use off `from`'s list.
  while (!from->uses().empty()) {
    Use u = from->uses().back();
    u.user->setInput(u.operand, to);
  }
}

void Graph::eraseDeadValues() {
  llvm::DenseSet<const Value *> graphInputs(inputList.begin(), inputList.end());
  std::vector<ValuePtr> kept;
  for (auto &v : valueList) {
    bool live = v->def || v->hasUses() || isOutput(v.get()) ||
                graphInputs.count(v.get());
    if (live)
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

NodeRange Graph::nodes() const {
  return llvm::map_range(nodeList, NodePointer());
}

Node *Graph::firstNode() const {
  return nodeList.empty() ? nullptr : &nodeList.front();
}

Node *Graph::lastNode() const {
  return nodeList.empty() ? nullptr : &nodeList.back();
}

Node *Graph::nextNode(const Node *n) const {
  auto it = std::next(NodeList::const_iterator(n->getIterator()));
  return it == nodeList.end() ? nullptr : const_cast<Node *>(&*it);
}

Node *Graph::prevNode(const Node *n) const {
  auto it = NodeList::const_iterator(n->getIterator());
  return it == nodeList.begin() ? nullptr : const_cast<Node *>(&*std::prev(it));
}

std::vector<Value *> Graph::initializers() const {
  std::vector<Value *> out;
  for (const auto &v : valueList)
    if (v->init)
      out.push_back(v.get());
  return out;
}

void Graph::swap(Graph &other) {
  std::swap(name, other.name);
  std::swap(modelPath, other.modelPath);
  std::swap(opsetVersion, other.opsetVersion);
  std::swap(ranks, other.ranks);
  arena.swap(other.arena); // With the nodes and values made in it.
  valueList.swap(other.valueList);
  // iplist::swap is unsupported; three O(1) splices do it.
  NodeList mine;
  mine.splice(mine.end(), nodeList);
  nodeList.splice(nodeList.end(), other.nodeList);
  other.nodeList.splice(other.nodeList.end(), mine);
  std::swap(nodeCount, other.nodeCount);
  inputList.swap(other.inputList);
  outputList.swap(other.outputList);
  std::swap(outputSet, other.outputSet);
  std::swap(valuesByName, other.valuesByName);
  std::swap(nodeNameCounts, other.nodeNameCounts);
  std::swap(nextValueId, other.nextValueId);
  std::swap(nextNodeId, other.nextNodeId);
}

std::unique_ptr<Graph> Graph::clone() const {
  auto copy = std::make_unique<Graph>();
  copy->name = name;
  copy->modelPath = modelPath;
  copy->opsetVersion = opsetVersion;
  copy->ranks = ranks;
  // Values by id (ids are dense and kept), not a hash map of pointers.
  std::vector<Value *> map(nextValueId, nullptr);
  auto mapped = [&](const Value *v) { return v ? map[v->id] : nullptr; };
  copy->valueList.reserve(valueList.size());
  for (const auto &v : valueList) {
    Value *c = copy->addValue(v->name, v->dtype, v->shape, v->role);
    c->id = v->id;
    c->init = v->init;
    c->tier = v->tier;
    c->shardOf = v->shardOf;
    map[v->id] = c;
  }
  // The names are the same: counted once, here, not node by node.
  copy->nodeNameCounts = nodeNameCounts;
  llvm::SmallVector<Value *, 8> ins, outs;
  for (const Node &n : nodeList) {
    ins.clear();
    outs.clear();
    for (Value *v : n.inputs)
      ins.push_back(mapped(v));
    for (Value *v : n.outputs)
      outs.push_back(mapped(v));
    Node *c = copy->insertUncounted(nullptr, n.opType, n.name, ins, outs,
                                    n.attrs, n.domain);
    c->id = n.id;
    c->stream = n.stream;
  }
  for (Value *v : inputList)
    copy->addInput(mapped(v));
  for (Value *v : outputList)
    copy->addOutput(mapped(v));
  copy->nextValueId = nextValueId;
  copy->nextNodeId = nextNodeId;
  return copy;
}

} // namespace zinc::ir
