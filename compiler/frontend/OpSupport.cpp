//===- OpSupport.cpp - Which ONNX nodes zinc accepts, from Ops.def --------===//
//
// The op list and the element types come from the op definitions
// (include/zinc/ops/Ops.def). Ops that zinc runs
// only in some modes get a rule in `opRules`: one line and one function each.
//
//===----------------------------------------------------------------------===//
#include "compiler/frontend/OpSupport.h"
#include "compiler/frontend/AttributeConversion.h"
#include "compiler/frontend/OnnxUtil.h"
#include "zinc/ops/OpDefinition.h"
#include "zinc/support/DType.h"
#include "zinc/support/Error.h"
#include "llvm/ADT/Optional.h"
#include <algorithm>

namespace zinc::frontend {

/// The element types Ops.def accepts for `opType`; None when zinc does not
/// implement it (an op it only folds from constants included).
static llvm::Optional<DTypeSet> acceptedTypes(llvm::StringRef opType) {
  const ops::OpDefinition *def = ops::lookupOp("", opType);
  if (!def || def->kind != ops::OpKind::Onnx)
    return llvm::None;
  return def->types;
}

/// True when `name` is a compile-time boolean scalar that is false.
static bool isConstantFalse(llvm::StringRef name, ConstantLookup constants) {
  const onnx::TensorProto *t = constants(name);
  if (!t)
    return false;
  llvm::Expected<TensorData> data = convertTensor(*t);
  if (!data) {
    llvm::consumeError(data.takeError());
    return false;
  }
  return data->dtype == DType::Bool && data->bytes.size() == 1 &&
         data->bytes[0] == 0;
}

static llvm::StringRef optionalInput(const onnx::NodeProto &node, int i) {
  return i < node.input_size() ? llvm::StringRef(node.input(i))
                               : llvm::StringRef();
}

/// The single element of a compile-time scalar, or None when `name` is not
/// one (or not of a float or bool type).
static llvm::Optional<double> constantScalar(llvm::StringRef name,
                                             ConstantLookup constants) {
  const onnx::TensorProto *t = constants(name);
  if (!t)
    return llvm::None;
  llvm::Expected<TensorData> data = convertTensor(*t);
  if (!data) {
    llvm::consumeError(data.takeError());
    return llvm::None;
  }
  return scalarValue(*data);
}

/// zinc decides Dropout's mode at compile time (build-training makes the
/// training form, --mode=infer the identity), so training_mode must be a
/// constant, and in training mode so must the ratio, in [0, 1).
static llvm::Error checkDropout(const onnx::NodeProto &node,
                                ConstantLookup constants) {
  llvm::StringRef trainingMode = optionalInput(node, 2);
  if (trainingMode.empty() || isConstantFalse(trainingMode, constants))
    return llvm::Error::success();
  if (!constantScalar(trainingMode, constants))
    return makeError("unsupported Dropout in training mode: training_mode "
                     "input '" +
                     trainingMode + "' must be a constant");
  llvm::StringRef ratioName = optionalInput(node, 1);
  if (ratioName.empty())
    return llvm::Error::success(); // 0.5
  llvm::Optional<double> ratio = constantScalar(ratioName, constants);
  if (!ratio)
    return makeError("unsupported Dropout in training mode: ratio input '" +
                     ratioName + "' must be a constant float scalar");
  if (!(*ratio >= 0 && *ratio < 1))
    return makeError("unsupported Dropout ratio " + std::to_string(*ratio) +
                     " (input '" + ratioName + "'): it must be in [0, 1)");
  return llvm::Error::success();
}

/// Inference mode normalises with the given running statistics; training
/// mode (opset 14+) with the batch statistics, and its optional outputs 1
/// and 2 are the updated running mean and variance, which zinc keeps as
/// model state (see GraphBuilder). Other outputs beyond Y (the opset < 14
/// forms) are not implemented.
static llvm::Error checkBatchNormalization(const onnx::NodeProto &node,
                                           ConstantLookup) {
  bool training = false;
  for (const onnx::AttributeProto &a : node.attribute())
    if (a.name() == "training_mode")
      training = a.i() != 0;
  int outputs = std::count_if(node.output().begin(), node.output().end(),
                              [](const std::string &o) { return !o.empty(); });
  if (training ? node.output_size() > 3 : outputs > 1)
    return makeError("unsupported BatchNormalization with " +
                     std::to_string(outputs) + " outputs" +
                     (training ? " (training mode has Y, running_mean and "
                                 "running_var)"
                               : " (only the normalized output Y is "
                                 "supported outside training_mode=1)"));
  return llvm::Error::success();
}

namespace {
struct OpRule {
  const char *opType;
  llvm::Error (*check)(const onnx::NodeProto &, ConstantLookup);
};
} // namespace

static const OpRule opRules[] = {
    {"Dropout", checkDropout},
    {"BatchNormalization", checkBatchNormalization},
};

llvm::Error checkOpSupported(const onnx::NodeProto &node,
                             ConstantLookup constants) {
  if (!isDefaultDomain(node.domain()))
    return makeError("unsupported op '" + node.op_type() + "' in domain '" +
                     node.domain() + "'");
  if (!acceptedTypes(node.op_type()))
    return makeError("unsupported op '" + node.op_type() + "'");
  for (const OpRule &rule : opRules)
    if (node.op_type() == rule.opType)
      if (llvm::Error err = rule.check(node, constants))
        return err;
  return llvm::Error::success();
}

static llvm::Error checkOne(DTypeSet accepted, int code, const char *what,
                            int index, const std::string &name) {
  if (code == onnx::TensorProto::UNDEFINED)
    return llvm::Error::success();
  llvm::Optional<DType> dtype = dtypeFromOnnx(code);
  if (dtype && accepted.contains(*dtype))
    return llvm::Error::success();
  return makeError("unsupported element type " + elementTypeName(code) +
                   " for " + what + " " + std::to_string(index) + " '" + name +
                   "'");
}

llvm::Error checkElementTypes(const onnx::NodeProto &node,
                              ElementTypeLookup elemTypeOf) {
  llvm::Optional<DTypeSet> accepted = acceptedTypes(node.op_type());
  if (!accepted)
    return makeError("unsupported op '" + node.op_type() + "'");
  for (int i = 0; i < node.input_size(); ++i)
    if (!node.input(i).empty())
      if (llvm::Error err = checkOne(*accepted, elemTypeOf(node.input(i)),
                                     "input", i, node.input(i)))
        return err;
  for (int i = 0; i < node.output_size(); ++i)
    if (!node.output(i).empty())
      if (llvm::Error err = checkOne(*accepted, elemTypeOf(node.output(i)),
                                     "output", i, node.output(i)))
        return err;
  return llvm::Error::success();
}

} // namespace zinc::frontend
