//===- ShapeFolding.h - Folds shape computations to constants -------------===//
#ifndef ZINC_COMPILER_FRONTEND_SHAPEFOLDING_H
#define ZINC_COMPILER_FRONTEND_SHAPEFOLDING_H

#include "onnx/onnx_pb.h"
#include "llvm/ADT/StringMap.h"

namespace zinc::frontend {

/// The most elements a folded value may have. Shape computations are a few
/// integers; masks derived from sizes (a causal mask sliced to the sequence
/// length, BERT's all-ones attention mask) are up to seq^2 elements. A value
/// above this stays an op the runtime computes: its inputs were folded, so
/// its shape is static either way.
constexpr int64_t kMaxFoldedElements = int64_t(1) << 20;

/// Replaces every node whose output is computable from shapes and constants
/// with a Constant node holding that output: Shape and Size of values whose
/// type is static, and every op ConstantEvaluator knows whose inputs are
/// constants (integer and bool initializers held inline, Constant nodes,
/// values folded before). Float initializers are never folded through: they
/// are parameters. `types` are the value types after shape inference; the
/// caller infers shapes again after a round that changed anything, since a
/// folded Reshape target can make more shapes static. Returns true when it
/// folded any node.
bool foldShapeComputations(onnx::GraphProto &graph, int64_t opset,
                           const llvm::StringMap<const onnx::TypeProto *> &types);

} // namespace zinc::frontend

#endif
