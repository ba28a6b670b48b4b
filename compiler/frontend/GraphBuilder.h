//===- GraphBuilder.h - Builds zinc's IR from a checked ONNX graph --------===//
#ifndef ZINC_COMPILER_FRONTEND_GRAPHBUILDER_H
#define ZINC_COMPILER_FRONTEND_GRAPHBUILDER_H

#include "compiler/frontend/Initializers.h"
#include "onnx/onnx_pb.h"
#include "zinc/ir/Graph.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"
#include <memory>

namespace zinc::frontend {

/// Builds the IR of `model`, whose every value has a known element type and a
/// static shape in `types` (the importer checked that). Initializers become
/// Parameters (float) or Constants with their references, graph inputs that
/// are not initializers become Inputs, node outputs Activations.
/// `absModelPath` is recorded for the runtime, which re-reads inline
/// initializers from it.
llvm::Expected<std::unique_ptr<ir::Graph>>
buildGraph(const onnx::ModelProto &model,
           llvm::ArrayRef<InitializerInfo> initializers,
           const llvm::StringMap<const onnx::TypeProto *> &types,
           llvm::StringRef absModelPath);

} // namespace zinc::frontend

#endif
