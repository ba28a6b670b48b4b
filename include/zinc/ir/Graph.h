//===- Graph.h - zinc's IR: values, nodes and the graph that owns them ----===//
//
// Every shape is static: the frontend binds symbolic dimensions before a
// Graph exists. Initializers are references to bytes (file, offset, length),
// never the bytes themselves, so a Graph of a 1T-parameter model is small.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_IR_GRAPH_H
#define ZINC_IR_GRAPH_H

#include "zinc/ops/OpEffects.h"
#include "zinc/support/Attribute.h"
#include "zinc/support/DType.h"
#include "zinc/support/HeapOptional.h"
#include "zinc/support/Sharding.h"
#include "zinc/support/Tier.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/ilist.h"
#include "llvm/ADT/ilist_node.h"
#include "llvm/ADT/iterator_range.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/Optional.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Allocator.h"
#include "llvm/Support/Compiler.h"
#include <memory>
#include <string>
#include <vector>

namespace zinc::ir {


/// What a value is for; later passes decide tiers and sharding from it.
enum class ValueRole {
  Input,      ///< Graph input, fed every step.
  Parameter,  ///< Float initializer: a weight.
  Constant,   ///< Non-float initializer (shapes, indices): never trained.
  Activation, ///< Produced by a node.
  /// Persistent training state (optimizer moments, loss scale): no
  /// definition; zero at load, or, with an initializer, that initializer
  /// converted to its dtype (a parameter's compute-precision copy);
  /// updated in place by the node that owns it.
  State,
  /// Model state the graph itself updates every training step (BatchNorm's
  /// running mean and variance): loaded from its initializer, written in
  /// place by the update the build-training pass appends, saved with the
  /// weights, but no gradient reaches it and no optimizer touches it.
  ModelState,
};
llvm::StringRef roleName(ValueRole r);

/// The memory a value lives in (its home, for persistent values), named as
/// everywhere else (zinc/support/Tier.h).
using Tier = MemoryTier;
using zinc::parseTierName;
using zinc::tierName;

/// The queue a node runs on. Compute is the GPU's kernels; Host runs on the
/// CPU (optimizer updates of offloaded states); the others move bytes.
enum class Stream { Compute, H2D, D2H, Nvme, Collective, Host };
llvm::StringRef streamName(Stream s);
llvm::Optional<Stream> parseStreamName(llvm::StringRef name);

/// Where an initializer's bytes live. The compiler never reads them.
struct InitializerRef {
  /// The ONNX initializer's name.
  std::string name;
  /// External-data file, relative to the model's directory; empty when the
  /// bytes are inline in the model file.
  std::string file;
  uint64_t offset = 0;
  /// Bytes; 0 for inline initializers (the loader takes the size from the
  /// tensor type).
  uint64_t length = 0;
  /// A tile's share of the initializer (the tile pass): the value holds
  /// the initializer's elements [sliceBegin, sliceBegin + the value's
  /// extent) along `sliceAxis`, the initializer itself being `wholeShape`.
  /// Empty `wholeShape`: the whole initializer.
  llvm::SmallVector<int64_t, 4> wholeShape;
  int64_t sliceAxis = 0;
  int64_t sliceBegin = 0;
  /// The PyTorch state_dict key of the parameter the initializer holds,
  /// when the exporter named the initializer itself (`onnx::MatMul_12`, a
  /// folded transpose) and the frontend traced it back; `pytorchTransposed`:
  /// the initializer is that parameter transposed. Empty: the initializer's
  /// name is the key (or none is known).
  std::string pytorchName;
  bool pytorchTransposed = false;

  bool isExternal() const { return !file.empty(); }
  bool isSlice() const { return !wholeShape.empty(); }
  bool operator==(const InitializerRef &o) const {
    return name == o.name && file == o.file && offset == o.offset &&
           length == o.length && wholeShape == o.wholeShape &&
           sliceAxis == o.sliceAxis && sliceBegin == o.sliceBegin &&
           pytorchName == o.pytorchName &&
           pytorchTransposed == o.pytorchTransposed;
  }
};

struct Node;

/// One operand slot that reads a value: input `operand` of `user`.
struct Use {
  Node *user = nullptr;
  unsigned operand = 0;
};

/// A tensor in the graph: defined once, by a node or as a graph input or
/// initializer.
struct Value {
  // What the passes read of every value they walk (its size, tier, role
  // and definition) lies first, in one cache line.
  unsigned id = 0;
  DType dtype = DType::F32;
  ValueRole role = ValueRole::Activation;
  /// Set by the place and insert-transfers passes; GPU until then.
  Tier tier = Tier::Gpu;
  /// The node that produces it; null for inputs and initializers.
  Node *def = nullptr;
  llvm::SmallVector<int64_t, 4> shape;
  std::string name;
  /// Where its initial bytes come from; empty for most values (hence on
  /// the heap, not inline: see HeapOptional.h).
  HeapOptional<InitializerRef> init;
  /// Set by the partition pass (ZeRO): the value is one rank's shard of a
  /// tensor of this shape, flattened and padded to an equal share per rank
  /// of the graph's ranks: rank r holds elements [r*s, r*s + s) of it,
  /// s = the value's one dimension; past the tensor's end, zeros. Empty:
  /// every rank holds the whole value.
  llvm::SmallVector<int64_t, 4> shardOf;

  bool isShard() const { return !shardOf.empty(); }
  /// Elements of the whole tensor: the shard's tensor when it is a shard.
  int64_t wholeElements() const {
    return isShard() ? zinc::numElements(shardOf) : numElements();
  }
  int64_t numElements() const { return zinc::numElements(shape); }
  uint64_t byteSize() const { return numElements() * dtypeSize(dtype); }

  /// Every operand slot reading this value, in no particular order (a node
  /// reading it twice appears twice). Kept up to date by Node::setInput and
  /// the Graph's insert and erase, each in O(1).
  llvm::ArrayRef<Use> uses() const { return useList; }
  bool hasUses() const { return !useList.empty(); }

private:
  friend struct Node;
  llvm::SmallVector<Use, 2> useList;
};

/// A node's inputs: read like an array of Value * (null where an optional
/// input is absent), changed only through Node::setInput and friends, which
/// keep every value's use list right.
class OperandList {
public:
  using iterator = Value *const *;
  iterator begin() const { return list.begin(); }
  iterator end() const { return list.end(); }
  size_t size() const { return list.size(); }
  bool empty() const { return list.empty(); }
  Value *operator[](size_t i) const { return list[i]; }
  Value *front() const { return list.front(); }
  Value *back() const { return list.back(); }
  operator llvm::ArrayRef<Value *>() const { return list; }

private:
  friend struct Node;
  llvm::SmallVector<Value *, 4> list;
  /// slot[i]: where input i's Use sits in list[i]'s use list.
  llvm::SmallVector<unsigned, 4> slot;
};

/// An operation. ONNX ops keep their ONNX names in the default domain ("");
/// zinc's own ops use the domain "zinc". Lives in its graph's intrusive
/// list, so inserting and erasing anywhere is O(1).
struct Node : public llvm::ilist_node<Node> {
  Node() = default;
  Node(const Node &) = delete;
  Node &operator=(const Node &) = delete;
  /// Leaves the use lists of its inputs.
  ~Node();

  // What the passes read of every node they walk (its stream and
  // operands) lies first, in the cache line the walk's list link is
  // loaded with: a walk over 10^5 nodes waits on memory, not on compute.
  unsigned id = 0;
  /// Set by insert-transfers; compute until then.
  Stream stream = Stream::Compute;
  /// null where an optional input is absent.
  OperandList inputs;
  /// null where an optional output is not requested.
  llvm::SmallVector<Value *, 2> outputs;
  std::string domain;
  std::string opType;
  std::string name;
  AttributeList attrs;

  /// Points input `i` at `v` (null: absent), moving the use.
  void setInput(unsigned i, Value *v);
  /// Replaces all inputs (their number may change).
  void setInputs(llvm::ArrayRef<Value *> values);
  /// Points every input that reads `from` at `to`; whether any did.
  bool replaceUsesOfWith(Value *from, Value *to);

  /// The op's declared effects (zinc/ops/OpEffects.h).
  const OpEffects &effects() const { return opEffects(domain, opType); }
  /// Whether the node updates its input `i` in place, as declared.
  bool writesInput(unsigned i) const {
    return i < inputs.size() && inputs[i] && effects().writesInput(i);
  }

  /// "node 'MatMul_3' (MatMul)", for diagnostics.
  std::string describe() const;

private:
  friend class Graph;
  void addUse(unsigned i);
  void dropUse(unsigned i);
  /// Forgets the inputs without leaving their use lists: for a graph
  /// destroying all its nodes and values at once.
  void forgetInputs() {
    inputs.list.clear();
    inputs.slot.clear();
  }
};

/// Destroys a node or value without freeing its bytes: they belong to the
/// arena of the graph that made it (Graph::arena). Under AddressSanitizer
/// the bytes are poisoned, so a use of what was erased is still reported.
struct DestroyInPlace {
  template <class T> void operator()(T *p) const {
    p->~T();
    __asan_poison_memory_region(p, sizeof(T));
  }
};
using ValuePtr = std::unique_ptr<Value, DestroyInPlace>;

} // namespace zinc::ir

namespace llvm {
/// A graph's node list destroys the nodes it erases but leaves their bytes
/// to the graph's arena.
template <> struct ilist_alloc_traits<zinc::ir::Node> {
  static void deleteNode(zinc::ir::Node *n) { zinc::ir::DestroyInPlace()(n); }
};
} // namespace llvm

namespace zinc::ir {

/// The nodes of a graph in program order, as pointers.
struct NodePointer {
  Node *operator()(Node &n) const { return &n; }
};
using NodeList = llvm::iplist<Node>;
using NodeRange =
    llvm::iterator_range<llvm::mapped_iterator<NodeList::iterator, NodePointer>>;

/// A graph in program order. Owns its values and nodes.
class Graph {
public:
  Graph() = default;
  /// Frees the nodes without keeping use lists up to date on the way.
  ~Graph();
  Graph(const Graph &) = delete;
  Graph &operator=(const Graph &) = delete;
  /// A deep copy: same names, ids, attributes and order, new objects.
  std::unique_ptr<Graph> clone() const;
  /// Exchanges everything with `other` (O(1)): a pass that worked on a
  /// clone makes it the graph.
  void swap(Graph &other);

  std::string name;
  /// The ONNX model the graph came from (absolute path); the runtime loads
  /// inline initializers from it.
  std::string modelPath;
  /// Version of the default ONNX opset the model imports.
  int64_t opsetVersion = 17;
  /// Data-parallel ranks the step is planned for (zinc-compile --ranks):
  /// every rank runs this graph on its share of the batch; shards
  /// (Value::shardOf) split across this many.
  unsigned ranks = 1;

  /// Creates a value; its name must be unique in the graph (asserted: a
  /// duplicate is the caller's bug, the frontend checks user input first).
  Value *addValue(llvm::StringRef name, DType dtype,
                  llvm::ArrayRef<int64_t> shape, ValueRole role);
  /// Appends a node at the end of the program and sets `def` of its outputs.
  Node *addNode(llvm::StringRef opType, llvm::StringRef name,
                llvm::ArrayRef<Value *> inputs, llvm::ArrayRef<Value *> outputs,
                AttributeList attrs = {}, llvm::StringRef domain = "");
  /// Inserts a node before `pos` (at the end when pos is null). O(1).
  Node *insertNode(Node *pos, llvm::StringRef opType, llvm::StringRef name,
                   llvm::ArrayRef<Value *> inputs,
                   llvm::ArrayRef<Value *> outputs, AttributeList attrs = {},
                   llvm::StringRef domain = "");
  /// Moves `n` to just before `pos` (to the end when pos is null). O(1).
  void moveBefore(Node *n, Node *pos);
  /// Removes a node; its outputs stay as values without a definition. O(1)
  /// plus its operands.
  void eraseNode(Node *n);
  /// Points every use of `from` at `to`.
  void replaceAllUsesWith(Value *from, Value *to);
  /// Removes values that are no longer defined or used (and are not
  /// graph inputs or outputs). Keeps the order of the rest.
  void eraseDeadValues();

  Value *lookupValue(llvm::StringRef name) const;
  /// A name not yet used by any value, built from `base`.
  std::string uniqueValueName(llvm::StringRef base) const;
  /// A name not yet used by any node, built from `base`.
  std::string uniqueNodeName(llvm::StringRef base) const;

  void addInput(Value *v) { inputList.push_back(v); }
  void addOutput(Value *v) {
    outputList.push_back(v);
    outputSet.insert(v);
  }
  llvm::ArrayRef<Value *> inputs() const { return inputList; }
  llvm::ArrayRef<Value *> outputs() const { return outputList; }
  void setOutputs(llvm::ArrayRef<Value *> outs) {
    outputList.assign(outs.begin(), outs.end());
    outputSet.clear();
    outputSet.insert(outs.begin(), outs.end());
  }
  /// Whether `v` is a graph output. O(1).
  bool isOutput(const Value *v) const { return outputSet.count(v); }

  /// Values in creation order (deterministic).
  llvm::ArrayRef<ValuePtr> values() const { return valueList; }
  /// Nodes in program order.
  NodeRange nodes() const;
  size_t numNodes() const { return nodeCount; }
  /// Every value's id is below this: a dense index for per-value tables.
  unsigned valueIdBound() const { return nextValueId; }
  /// The first and last node, or null.
  Node *firstNode() const;
  Node *lastNode() const;
  /// The node after / before `n` in program order, or null.
  Node *nextNode(const Node *n) const;
  Node *prevNode(const Node *n) const;
  /// Initializers (parameters and constants) in creation order.
  std::vector<Value *> initializers() const;

private:
  /// insertNode without counting the node's name (clone copies the counts).
  Node *insertUncounted(Node *pos, llvm::StringRef opType,
                        llvm::StringRef nodeName,
                        llvm::ArrayRef<Value *> inputs,
                        llvm::ArrayRef<Value *> outputs, AttributeList attrs,
                        llvm::StringRef domain);

  /// Where the graph's nodes and values live, one after another in the
  /// order they are made: a clone lays its nodes out in program order, so
  /// a pass walking 10^5 nodes reads memory in order instead of waiting on
  /// a cache miss a node. An erased node
  /// or value is destroyed at once; its bytes go with the graph. Declared
  /// first: destroyed after everything in it.
  std::unique_ptr<llvm::BumpPtrAllocator> arena =
      std::make_unique<llvm::BumpPtrAllocator>();
  std::vector<ValuePtr> valueList;
  /// Mutable so that a const Graph can hand out its nodes, as it always has:
  /// constness of a graph is about its structure, not its nodes.
  mutable NodeList nodeList;
  size_t nodeCount = 0;
  std::vector<Value *> inputList;
  std::vector<Value *> outputList;
  llvm::DenseSet<const Value *> outputSet;
  llvm::StringMap<Value *> valuesByName;
  /// How many nodes carry each name (ONNX allows duplicates and empties).
  llvm::StringMap<unsigned> nodeNameCounts;
  unsigned nextValueId = 0;
  unsigned nextNodeId = 0;
};

} // namespace zinc::ir

#endif
