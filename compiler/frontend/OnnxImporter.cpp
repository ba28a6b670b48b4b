//===- OnnxImporter.cpp - Turns an ONNX model into zinc's IR --------------===//
//
// The pipeline: read, refuse unsupported ops, onnx's checker, bind --dim,
// onnx's shape inference, check element types and static shapes, build the
// IR. libonnx reports problems by throwing; this file is the one place that
// catches, and every error leaves it prefixed with the model path.
//
//===----------------------------------------------------------------------===//
#include "zinc/frontend/OnnxImporter.h"
#include "compiler/frontend/DimBinding.h"
#include "compiler/frontend/GraphBuilder.h"
#include "compiler/frontend/Initializers.h"
#include "compiler/frontend/ModelReader.h"
#include "compiler/frontend/OnnxUtil.h"
#include "compiler/frontend/OpSupport.h"
#include "compiler/frontend/ReshapeFallback.h"
#include "compiler/frontend/PytorchNames.h"
#include "compiler/frontend/ShapeFolding.h"
#include "compiler/frontend/ConstantEvaluator.h"
#include "compiler/frontend/ControlFlow.h"
#include "onnx/checker.h"
#include "onnx/defs/schema.h"
#include "onnx/shape_inference/implementation.h"
#include "zinc/support/Error.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include <exception>
#include <google/protobuf/arena.h>

namespace zinc::frontend {

/// The checker's messages span lines (a node's debug string, then
/// "\n\n==> Context: ..."); a diagnostic is one line: "<finding> (<context>)".
static std::string formatCheckerMessage(llvm::StringRef msg) {
  auto [finding, context] = msg.split("==> Context:");
  std::string out = oneLine(finding);
  if (!context.trim().empty())
    out += " (" + oneLine(context) + ")";
  return out;
}

/// onnx wraps each node's error in "[ShapeInferenceError] Shape inference
/// error(s): (op_type:X, node name: Y): [ShapeInferenceError] <what>", one per
/// line; the tags say nothing the diagnostic's "shape inference failed" does
/// not, so they go, and the errors are joined with "; ".
static std::string formatInferenceMessage(llvm::StringRef msg) {
  std::string text = msg.str();
  for (llvm::StringRef noise :
       {"[ShapeInferenceError] Shape inference error(s): ",
        "[ShapeInferenceError] "}) {
    size_t at;
    while ((at = text.find(noise.str())) != std::string::npos)
      text.erase(at, noise.size());
  }
  llvm::SmallVector<llvm::StringRef, 4> lines;
  llvm::StringRef(text).split(lines, '\n', -1, /*KeepEmpty=*/false);
  std::string out;
  for (llvm::StringRef line : lines) {
    if (line.trim().empty())
      continue;
    if (!out.empty())
      out += "; ";
    out += oneLine(line);
  }
  return out;
}

/// Runs onnx's checker. The model must not hold external initializers any
/// more (see detachExternalInitializers): the checker would stat their files.
static llvm::Error runChecker(const onnx::ModelProto &model) {
  try {
    onnx::checker::check_model(model);
  } catch (const std::exception &e) {
    return makeError("invalid model: " + formatCheckerMessage(e.what()));
  }
  return llvm::Error::success();
}

static llvm::Error runShapeInference(onnx::ModelProto &model) {
  onnx::ShapeInferenceOptions options(/*check_type=*/true,
                                      /*error_mode=*/1,
                                      /*enable_data_propagation=*/true);
  try {
    // Each round can give shapes to Reshapes onnx left unknown, which the
    // next round propagates to the nodes after them; a graph has finitely
    // many Reshapes, and a round that adds none ends the loop.
    for (int round = 0; round <= model.graph().node_size(); ++round) {
      PropagatedData data;
      onnx::shape_inference::InferShapes(
          model, onnx::OpSchemaRegistry::Instance(), options, &data);
      if (!inferReshapesFromPropagatedData(*model.mutable_graph(), data))
        break;
    }
  } catch (const std::exception &e) {
    return makeError("shape inference failed: " +
                     formatInferenceMessage(e.what()));
  }
  return llvm::Error::success();
}

/// Compile-time tensors by name: inline initializers and Constant nodes'
/// `value` attributes. Pointers into `graph`, which must outlive the map.
static llvm::StringMap<const onnx::TensorProto *>
collectConstants(const onnx::GraphProto &graph) {
  llvm::StringMap<const onnx::TensorProto *> constants;
  for (const onnx::TensorProto &t : graph.initializer())
    if (t.data_location() != onnx::TensorProto::EXTERNAL)
      constants[t.name()] = &t;
  for (const onnx::NodeProto &n : graph.node()) {
    if (n.op_type() != "Constant" || !isDefaultDomain(n.domain()) ||
        n.output_size() != 1)
      continue;
    for (const onnx::AttributeProto &a : n.attribute())
      if (a.name() == "value" && a.has_t())
        constants[n.output(0)] = &a.t();
  }
  return constants;
}

/// True for the ops folding may remove although zinc has no kernel for
/// them: Shape arithmetic (Size, Floor, ...) on sizes --dim fixes, control
/// flow on such sizes and the tensor sequences it builds.
static bool isFoldableOnly(const onnx::NodeProto &node) {
  return isDefaultDomain(node.domain()) &&
         (node.op_type() == "Size" || node.op_type() == "If" ||
          node.op_type() == "Loop" ||
          llvm::StringRef(node.op_type()).startswith("Sequence") ||
          node.op_type() == "SplitToSequence" ||
          node.op_type() == "ConcatFromSequence" || canEvaluate(node.op_type()));
}

/// Refuses ops zinc lacks. Before folding (`beforeFolding`), an op the
/// folder can evaluate passes: whether it folds is known only once shapes
/// are; the check after folding refuses whatever stayed.
static llvm::Error checkOps(const onnx::GraphProto &graph, bool beforeFolding) {
  llvm::StringMap<const onnx::TensorProto *> constants =
      collectConstants(graph);
  auto lookup = [&](llvm::StringRef name) -> const onnx::TensorProto * {
    auto it = constants.find(name);
    return it == constants.end() ? nullptr : it->second;
  };
  for (int i = 0; i < graph.node_size(); ++i) {
    if (!beforeFolding && isControlFlowOp(graph.node(i)))
      return makeError(describeNode(graph.node(i), i) + ": unsupported " +
                       graph.node(i).op_type() + ": " +
                       describeRuntimeCondition(graph, graph.node(i)));
    llvm::Error err = checkOpSupported(graph.node(i), lookup);
    if (err && beforeFolding && isFoldableOnly(graph.node(i))) {
      llvm::consumeError(std::move(err));
      continue;
    }
    if (err)
      return addContext(std::move(err), describeNode(graph.node(i), i));
  }
  return llvm::Error::success();
}

static int64_t defaultOpset(const onnx::ModelProto &model) {
  for (const onnx::OperatorSetIdProto &opset : model.opset_import())
    if (isDefaultDomain(opset.domain()))
      return opset.version();
  return 0;
}

/// Shape inference, then folding of whatever shapes and constants decide,
/// until a round folds nothing: each folded Reshape target or Range can make
/// the shapes after it static, which the next round's Shape nodes fold.
static llvm::Error inferAndFoldShapes(onnx::ModelProto &model) {
  int64_t opset = defaultOpset(model);
  for (;;) {
    if (llvm::Error err = runShapeInference(model))
      return err;
    llvm::StringMap<const onnx::TypeProto *> types =
        collectValueTypes(model.graph());
    if (!foldShapeComputations(*model.mutable_graph(), opset, types))
      return llvm::Error::success();
  }
}

/// After shape inference: every node's element types are ones zinc and the
/// op accept, every value has a static shape, and graph inputs and
/// initializers no node uses are still of a type zinc can hold.
/// Why `out` has no static shape: the first dimension without a size, by the
/// symbol the exporter gave it where there was one.
static std::string describeUnknownDim(llvm::StringRef out,
                                      const onnx::TypeProto *type,
                                      const DimSymbols &symbols) {
  if (!type || !type->has_tensor_type() || !type->tensor_type().has_shape())
    return "";
  const auto &dims = type->tensor_type().shape().dim();
  for (int i = 0; i < dims.size(); ++i) {
    if (dims[i].has_dim_value() && dims[i].dim_value() >= 0)
      continue;
    std::string symbol;
    auto it = symbols.find(out);
    if (it != symbols.end() && i < static_cast<int>(it->second.size()))
      symbol = it->second[i];
    if (symbol.empty() && dims[i].has_dim_param())
      symbol = dims[i].dim_param();
    return ": dimension " + std::to_string(i) +
           (symbol.empty() ? "" : " ('" + symbol + "')") +
           " is not a constant once --dim values are bound and shape "
           "computations folded";
  }
  return "";
}

static llvm::Error
checkTypesAndShapes(const onnx::GraphProto &graph,
                    llvm::ArrayRef<InitializerInfo> initializers,
                    const llvm::StringMap<const onnx::TypeProto *> &types,
                    const DimSymbols &symbols) {
  llvm::StringMap<int> initTypes;
  for (const InitializerInfo &init : initializers)
    initTypes[init.ref.name] = init.elemType;
  auto elemTypeOf = [&](llvm::StringRef name) {
    auto init = initTypes.find(name);
    if (init != initTypes.end())
      return init->second;
    auto it = types.find(name);
    return it == types.end() ? 0 : elementType(*it->second);
  };

  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto &node = graph.node(i);
    if (llvm::Error err = checkElementTypes(node, elemTypeOf))
      return addContext(std::move(err), describeNode(node, i));
    for (const std::string &out : node.output()) {
      if (out.empty())
        continue;
      auto it = types.find(out);
      if (it != types.end() &&
          it->second->value_case() != onnx::TypeProto::VALUE_NOT_SET &&
          !it->second->has_tensor_type())
        return makeError(describeNode(node, i) + ": output '" + out +
                         "' has unsupported type " + typeKindName(*it->second) +
                         "; zinc supports tensors only");
      if (it == types.end() || !elementType(*it->second) ||
          !staticShape(*it->second))
        return makeError(
            describeNode(node, i) + ": cannot infer a static shape for output '" +
            out + "'" +
            describeUnknownDim(out, it == types.end() ? nullptr : it->second,
                               symbols));
    }
  }
  for (const onnx::ValueInfoProto &vi : graph.input()) {
    if (initTypes.count(vi.name()))
      continue;
    if (!vi.type().has_tensor_type())
      return makeError("input '" + vi.name() + "' has unsupported type " +
                       typeKindName(vi.type()) +
                       "; zinc supports tensors only");
    int code = vi.type().tensor_type().elem_type();
    if (!dtypeFromOnnx(code))
      return makeError("input '" + vi.name() +
                       "' has unsupported element "
                       "type " +
                       elementTypeName(code));
  }
  for (const InitializerInfo &init : initializers)
    if (!dtypeFromOnnx(init.elemType))
      return makeError("initializer '" + init.ref.name +
                       "' has unsupported element type " +
                       elementTypeName(init.elemType));
  return llvm::Error::success();
}

static llvm::Expected<std::unique_ptr<ir::Graph>>
importModel(llvm::StringRef path, const ImportOptions &opts,
            const WarningHandler &warn) {
  llvm::SmallString<256> absPath(path);
  if (std::error_code ec = llvm::sys::fs::make_absolute(absPath))
    return makeError("cannot open: " + ec.message());
  llvm::sys::path::remove_dots(absPath);
  llvm::StringRef modelDir = llvm::sys::path::parent_path(absPath);

  // On an arena: a model of 10^5 nodes is a million small messages, freed
  // here at once instead of one by one.
  google::protobuf::Arena arena;
  onnx::ModelProto &model =
      *google::protobuf::Arena::CreateMessage<onnx::ModelProto>(&arena);
  if (llvm::Error err = readModel(path, model))
    return err;
  onnx::GraphProto &graph = *model.mutable_graph();

  llvm::Expected<std::vector<InitializerInfo>> initializers =
      collectInitializers(graph, modelDir, warn);
  if (!initializers)
    return initializers.takeError();
  // Before folding: the exporter's node names are what tell the module.
  namePytorchParameters(graph, *initializers, warn);
  llvm::StringSet<> initNames;
  for (const InitializerInfo &init : *initializers)
    initNames.insert(init.ref.name);

  // Unsupported ops first: onnx's checker would call an op it does not know
  // an invalid model, while for the user it is an op zinc lacks.
  if (llvm::Error err = checkOps(graph, /*beforeFolding=*/true))
    return err;
  detachExternalInitializers(graph);
  if (llvm::Error err = runChecker(model))
    return err;
  DimSymbols symbols;
  if (llvm::Error err =
          bindDimensions(graph, opts.dims, initNames, warn, symbols))
    return err;
  if (llvm::Error err = inferAndFoldShapes(model))
    return err;
  if (llvm::Error err = checkOps(graph, /*beforeFolding=*/false))
    return err;

  llvm::StringMap<const onnx::TypeProto *> types = collectValueTypes(graph);
  if (llvm::Error err = checkTypesAndShapes(graph, *initializers, types, symbols))
    return err;
  return buildGraph(model, *initializers, types, absPath);
}

llvm::Expected<std::unique_ptr<ir::Graph>>
importOnnxModel(llvm::StringRef path, const ImportOptions &opts) {
  WarningHandler warn = [&](const llvm::Twine &msg) {
    if (opts.warn)
      opts.warn(path + ": " + msg);
  };
  try {
    llvm::Expected<std::unique_ptr<ir::Graph>> graph =
        importModel(path, opts, warn);
    if (!graph)
      return addContext(graph.takeError(), path);
    return graph;
  } catch (const std::exception &e) {
    // libonnx and protobuf may throw from places not wrapped above; no
    // exception may leave the frontend.
    return makeError(path + ": " + oneLine(e.what()));
  }
}

} // namespace zinc::frontend
