//===- ConstantEvaluator.h - Evaluates ONNX nodes on known tensors --------===//
//
// The arithmetic of shape computations, one ONNX op at a time, over
// ConstantTensor: what folding needs to turn Shape -> Gather -> Range,
// Reshape targets and size-derived masks into constants. Ops whose value
// depends on a tensor's type rather than its data (Shape, Size) and the
// sources of constants (initializers, Constant) are the folder's, not this
// file's.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_COMPILER_FRONTEND_CONSTANTEVALUATOR_H
#define ZINC_COMPILER_FRONTEND_CONSTANTEVALUATOR_H

#include "compiler/frontend/ConstantTensor.h"
#include "onnx/onnx_pb.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/Optional.h"
#include "llvm/ADT/StringRef.h"

namespace zinc::frontend {

/// True when evaluateNode knows `opType` (default domain).
bool canEvaluate(llvm::StringRef opType);

/// The single output of `node` computed from its inputs (null for an absent
/// optional input), at default-domain opset `opset`. None when the node
/// cannot be evaluated here: an op or element type the evaluator lacks, an
/// input that breaks the op's rules (left for shape inference and the
/// runtime to report), or an output of more than `maxElements` elements.
llvm::Optional<ConstantTensor>
evaluateNode(const onnx::NodeProto &node,
             llvm::ArrayRef<const ConstantTensor *> inputs, int64_t opset,
             int64_t maxElements);

} // namespace zinc::frontend

#endif
