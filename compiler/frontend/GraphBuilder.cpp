//===- GraphBuilder.cpp - Builds zinc's IR from a checked ONNX graph ------===//
#include "compiler/frontend/GraphBuilder.h"
#include "compiler/frontend/AttributeConversion.h"
#include "compiler/frontend/OnnxUtil.h"
#include "zinc/support/Error.h"
#include "llvm/ADT/StringSet.h"

namespace zinc::frontend {

namespace {
class GraphBuilder {
public:
  explicit GraphBuilder(const llvm::StringMap<const onnx::TypeProto *> &types)
      : types(types), graph(std::make_unique<ir::Graph>()) {}

  llvm::Expected<std::unique_ptr<ir::Graph>>
  build(const onnx::ModelProto &model,
        llvm::ArrayRef<InitializerInfo> initializers,
        llvm::StringRef absModelPath);

private:
  /// Creates a value of a type found in `types`; the importer's checks make
  /// a failure here a model the checks missed, still reported, not asserted.
  llvm::Expected<ir::Value *> addTypedValue(const std::string &name,
                                            ir::ValueRole role);
  llvm::Expected<ir::Value *> addValue(const std::string &name, int elemType,
                                       llvm::ArrayRef<int64_t> shape,
                                       ir::ValueRole role);
  llvm::Error addNode(const onnx::NodeProto &node, size_t index);

  const llvm::StringMap<const onnx::TypeProto *> &types;
  std::unique_ptr<ir::Graph> graph;
};
} // namespace

llvm::Expected<ir::Value *>
GraphBuilder::addValue(const std::string &name, int elemType,
                       llvm::ArrayRef<int64_t> shape, ir::ValueRole role) {
  if (graph->lookupValue(name))
    return makeError("value '" + name + "' is defined more than once");
  llvm::Optional<DType> dtype = dtypeFromOnnx(elemType);
  if (!dtype)
    return makeError("value '" + name + "' has unsupported element type " +
                     elementTypeName(elemType));
  if (!fitsTensorBytes(shape, dtypeSize(*dtype)))
    return makeError("value '" + name + "' of shape " + formatShape(shape) +
                     " is larger than zinc plans for (" + std::to_string(kMaxTensorBytes) +
                     " bytes)");
  return graph->addValue(name, *dtype, shape, role);
}

llvm::Expected<ir::Value *> GraphBuilder::addTypedValue(const std::string &name,
                                                        ir::ValueRole role) {
  auto it = types.find(name);
  llvm::Optional<llvm::SmallVector<int64_t, 4>> shape;
  if (it != types.end())
    shape = staticShape(*it->second);
  if (!shape)
    return makeError("cannot infer a static shape for '" + name + "'");
  return addValue(name, elementType(*it->second), *shape, role);
}

/// BatchNormalization in training mode updates its running mean and variance
/// (inputs 3 and 4) every step: when they are float initializers they are
/// model state, not parameters. (build-training refuses other running
/// statistics; inference only reads them.)
static void markModelState(const onnx::NodeProto &node,
                           llvm::ArrayRef<ir::Value *> inputs) {
  if (node.op_type() != "BatchNormalization")
    return;
  bool training = false;
  for (const onnx::AttributeProto &a : node.attribute())
    if (a.name() == "training_mode")
      training = a.i() != 0;
  if (!training)
    return;
  for (unsigned i = 3; i < 5 && i < inputs.size(); ++i)
    if (ir::Value *v = inputs[i])
      if (v->init && v->role == ir::ValueRole::Parameter)
        v->role = ir::ValueRole::ModelState;
}

llvm::Error GraphBuilder::addNode(const onnx::NodeProto &node, size_t index) {
  llvm::SmallVector<ir::Value *, 4> inputs;
  for (const std::string &name : node.input()) {
    if (name.empty()) {
      inputs.push_back(nullptr); // an absent optional input
      continue;
    }
    ir::Value *v = graph->lookupValue(name);
    if (!v)
      return makeError("input '" + name + "' is not defined before the node");
    inputs.push_back(v);
  }
  markModelState(node, inputs);
  llvm::SmallVector<ir::Value *, 2> outputs;
  for (const std::string &name : node.output()) {
    if (name.empty()) {
      outputs.push_back(nullptr); // an optional output nobody asked for
      continue;
    }
    llvm::Expected<ir::Value *> v =
        addTypedValue(name, ir::ValueRole::Activation);
    if (!v)
      return v.takeError();
    outputs.push_back(*v);
  }
  AttributeList attrs;
  for (const onnx::AttributeProto &a : node.attribute()) {
    llvm::Expected<Attribute> attr = convertAttribute(a);
    if (!attr)
      return attr.takeError();
    attrs.set(std::move(*attr));
  }
  // The IR keeps "" for the default domain, whichever spelling the model used.
  std::string domain = isDefaultDomain(node.domain()) ? "" : node.domain();
  graph->addNode(node.op_type(), nodeName(node, index), inputs, outputs,
                 std::move(attrs), domain);
  return llvm::Error::success();
}

llvm::Expected<std::unique_ptr<ir::Graph>>
GraphBuilder::build(const onnx::ModelProto &model,
                    llvm::ArrayRef<InitializerInfo> initializers,
                    llvm::StringRef absModelPath) {
  const onnx::GraphProto &g = model.graph();
  graph->name = g.name();
  graph->modelPath = absModelPath.str();
  for (const onnx::OperatorSetIdProto &opset : model.opset_import())
    if (isDefaultDomain(opset.domain()))
      graph->opsetVersion = opset.version();

  llvm::StringSet<> initNames;
  for (const InitializerInfo &init : initializers)
    initNames.insert(init.ref.name);

  // An initializer that is also listed as an input (IR version < 4, or the
  // importer's own detaching of external initializers) is an initializer.
  for (const onnx::ValueInfoProto &vi : g.input()) {
    if (initNames.count(vi.name()))
      continue;
    llvm::Expected<ir::Value *> v =
        addTypedValue(vi.name(), ir::ValueRole::Input);
    if (!v)
      return addContext(v.takeError(), "input '" + vi.name() + "'");
    graph->addInput(*v);
  }
  for (const InitializerInfo &init : initializers) {
    llvm::Optional<DType> dtype = dtypeFromOnnx(init.elemType);
    ir::ValueRole role = dtype && isFloatDType(*dtype)
                             ? ir::ValueRole::Parameter
                             : ir::ValueRole::Constant;
    llvm::Expected<ir::Value *> v =
        addValue(init.ref.name, init.elemType, init.shape, role);
    if (!v)
      return addContext(v.takeError(), "initializer '" + init.ref.name + "'");
    (*v)->init = init.ref;
  }
  for (int i = 0; i < g.node_size(); ++i)
    if (llvm::Error err = addNode(g.node(i), i))
      return addContext(std::move(err), describeNode(g.node(i), i));
  for (const onnx::ValueInfoProto &vi : g.output()) {
    ir::Value *v = graph->lookupValue(vi.name());
    if (!v)
      return makeError("output '" + vi.name() +
                       "' is not produced by any node");
    graph->addOutput(v);
  }
  return std::move(graph);
}

llvm::Expected<std::unique_ptr<ir::Graph>>
buildGraph(const onnx::ModelProto &model,
           llvm::ArrayRef<InitializerInfo> initializers,
           const llvm::StringMap<const onnx::TypeProto *> &types,
           llvm::StringRef absModelPath) {
  return GraphBuilder(types).build(model, initializers, absModelPath);
}

} // namespace zinc::frontend
