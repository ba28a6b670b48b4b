//===- Graph.h - zinc's IR: values, nodes and the graph that owns them ----===//
//
// Every shape is static: the frontend binds symbolic dimensions before a
// Graph exists. Initializers are references to bytes (file, offset, length),
// never the bytes themselves, so a Graph of a 1T-parameter model is small.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_IR_GRAPH_H
#define ZINC_IR_GRAPH_H

#include "zinc/support/Attribute.h"
#include "zinc/support/DType.h"
#include "llvm/ADT/Optional.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include <memory>
#include <string>
#include <vector>

namespace zinc::ir {

class Node;

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

/// The memory a value lives in (its home, for persistent values).
enum class Tier { Gpu, Cpu, Nvme };
llvm::StringRef tierName(Tier t);
llvm::Optional<Tier> parseTierName(llvm::StringRef name);

/// The queue a node runs on. Compute is the GPU's kernels; Host runs on the
/// CPU (optimizer updates of offloaded states); the others move bytes.
enum class Stream { Compute, H2D, D2H, Nvme, Collective, Host };
llvm::StringRef streamName(Stream s);
llvm::Optional<Stream> parseStreamName(llvm::StringRef name);

/// Where an initializer's bytes live. The compiler never reads them.
struct InitializerRef {
  /// The ONNX initializer's name.
  std::string name;
  /// External-data file, absolute; empty when the bytes are inline in the
  /// model file.
  std::string file;
  uint64_t offset = 0;
  /// Bytes; 0 for inline initializers (the loader takes the size from the
  /// tensor type).
  uint64_t length = 0;
  bool isExternal() const { return !file.empty(); }
  bool operator==(const InitializerRef &o) const {
    return name == o.name && file == o.file && offset == o.offset &&
           length == o.length;
  }
};

/// A tensor in the graph: defined once, by a node or as a graph input or
/// initializer.
struct Value {
  unsigned id = 0;
  std::string name;
  DType dtype = DType::F32;
  llvm::SmallVector<int64_t, 4> shape;
  ValueRole role = ValueRole::Activation;
  llvm::Optional<InitializerRef> init;
  /// The node that produces it; null for inputs and initializers.
  Node *def = nullptr;
  /// Set by the place and insert-transfers passes; GPU until then.
  Tier tier = Tier::Gpu;

  int64_t numElements() const { return zinc::numElements(shape); }
  uint64_t byteSize() const { return numElements() * dtypeSize(dtype); }
};

/// An operation. ONNX ops keep their ONNX names in the default domain ("");
/// zinc's own ops use the domain "zinc".
struct Node {
  unsigned id = 0;
  std::string name;
  std::string domain;
  std::string opType;
  /// null where an optional input is absent.
  llvm::SmallVector<Value *, 4> inputs;
  /// null where an optional output is not requested.
  llvm::SmallVector<Value *, 2> outputs;
  AttributeList attrs;
  /// Set by insert-transfers; compute until then.
  Stream stream = Stream::Compute;

  /// "node 'MatMul_3' (MatMul)", for diagnostics.
  std::string describe() const;
};

/// A graph in program order. Owns its values and nodes.
class Graph {
public:
  Graph() = default;
  Graph(const Graph &) = delete;
  Graph &operator=(const Graph &) = delete;

  std::string name;
  /// The ONNX model the graph came from (absolute path); the runtime loads
  /// inline initializers from it.
  std::string modelPath;
  /// Version of the default ONNX opset the model imports.
  int64_t opsetVersion = 17;

  /// Creates a value; its name must be unique in the graph (asserted: a
  /// duplicate is the caller's bug, the frontend checks user input first).
  Value *addValue(llvm::StringRef name, DType dtype,
                  llvm::ArrayRef<int64_t> shape, ValueRole role);
  /// Appends a node at the end of the program and sets `def` of its outputs.
  Node *addNode(llvm::StringRef opType, llvm::StringRef name,
                llvm::ArrayRef<Value *> inputs, llvm::ArrayRef<Value *> outputs,
                AttributeList attrs = {}, llvm::StringRef domain = "");
  /// Inserts a node before `pos` (at the end when pos is null).
  Node *insertNode(Node *pos, llvm::StringRef opType, llvm::StringRef name,
                   llvm::ArrayRef<Value *> inputs,
                   llvm::ArrayRef<Value *> outputs, AttributeList attrs = {},
                   llvm::StringRef domain = "");
  /// Removes a node; its outputs stay as values without a definition.
  void eraseNode(Node *n);
  /// Removes values that are no longer defined or used (and are not
  /// graph inputs or outputs). Keeps the order of the rest.
  void eraseDeadValues();

  Value *lookupValue(llvm::StringRef name) const;
  /// A name not yet used by any value, built from `base`.
  std::string uniqueValueName(llvm::StringRef base) const;
  /// A name not yet used by any node, built from `base`.
  std::string uniqueNodeName(llvm::StringRef base) const;

  void addInput(Value *v) { inputList.push_back(v); }
  void addOutput(Value *v) { outputList.push_back(v); }
  llvm::ArrayRef<Value *> inputs() const { return inputList; }
  llvm::ArrayRef<Value *> outputs() const { return outputList; }
  void setOutputs(llvm::ArrayRef<Value *> outs) {
    outputList.assign(outs.begin(), outs.end());
  }

  /// Values in creation order (deterministic).
  llvm::ArrayRef<std::unique_ptr<Value>> values() const { return valueList; }
  /// Nodes in program order.
  llvm::ArrayRef<std::unique_ptr<Node>> nodes() const { return nodeList; }
  /// Initializers (parameters and constants) in creation order.
  std::vector<Value *> initializers() const;

private:
  std::vector<std::unique_ptr<Value>> valueList;
  std::vector<std::unique_ptr<Node>> nodeList;
  std::vector<Value *> inputList;
  std::vector<Value *> outputList;
  llvm::StringMap<Value *> valuesByName;
  /// How many nodes carry each name (ONNX allows duplicates and empties).
  llvm::StringMap<unsigned> nodeNameCounts;
  unsigned nextValueId = 0;
  unsigned nextNodeId = 0;
};

} // namespace zinc::ir

#endif
