//===- OnnxImporter.h - Turns an ONNX model into zinc's IR -----*- C++ -*-===//
//
// The only entry point into the frontend. libonnx (parser, checker, shape
// inference) does the reading and the checking; everything it throws is
// turned into an llvm::Error here, so no exception leaves the frontend.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_FRONTEND_ONNXIMPORTER_H
#define ZINC_FRONTEND_ONNXIMPORTER_H

#include "zinc/ir/Graph.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"
#include <cstdint>
#include <functional>
#include <memory>

namespace zinc::frontend {

struct ImportOptions {
  /// --dim NAME=VALUE bindings for symbolic dimensions.
  llvm::StringMap<int64_t> dims;
  /// Called for each warning (e.g. a missing external-data file); the tool
  /// prints it. May be empty, then warnings are dropped.
  std::function<void(const llvm::Twine &)> warn;
};

/// Reads MODEL (binary .onnx, or the ONNX textual syntax when the file name
/// ends in .onnxtxt), checks it with onnx's checker, runs onnx shape inference
/// (with data propagation) after binding --dim values, checks every op and
/// element type against Ops.def, and builds the IR.
/// Every error message starts with the model path as given, e.g.
/// "model.onnx: node 'MatMul_3' (MatMul): ...".
llvm::Expected<std::unique_ptr<ir::Graph>>
importOnnxModel(llvm::StringRef path, const ImportOptions &opts);

} // namespace zinc::frontend

#endif
