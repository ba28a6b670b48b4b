//===- DimBinding.h - Binds symbolic dimensions to --dim values -----------===//
#ifndef ZINC_COMPILER_FRONTEND_DIMBINDING_H
#define ZINC_COMPILER_FRONTEND_DIMBINDING_H

#include "compiler/frontend/Initializers.h"
#include "onnx/onnx_pb.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Error.h"

namespace zinc::frontend {

/// The symbolic names an exporter gave the dimensions of each output and
/// value_info that --dim left unbound, by value name and dimension index
/// ("" where a dimension had none): what a diagnostic names when such a
/// dimension cannot be folded to a constant.
using DimSymbols = llvm::StringMap<llvm::SmallVector<std::string, 4>>;

/// Replaces every dim_param of the graph's inputs, outputs and value_info
/// that `dims` binds with its value, so shape inference sees static inputs.
/// A graph input (not an initializer) whose dimension stays symbolic or
/// unknown is an error naming it; an unbound output or value_info dimension
/// is cleared, for shape inference to fill in. A binding whose name appears
/// nowhere is a warning. The cleared names land in `cleared`.
llvm::Error bindDimensions(onnx::GraphProto &graph,
                           const llvm::StringMap<int64_t> &dims,
                           const llvm::StringSet<> &initializerNames,
                           const WarningHandler &warn, DimSymbols &cleared);

} // namespace zinc::frontend

#endif
