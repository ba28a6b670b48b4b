//===- ModelReader.h - Reads an ONNX model file into a ModelProto ---------===//
#ifndef ZINC_COMPILER_FRONTEND_MODELREADER_H
#define ZINC_COMPILER_FRONTEND_MODELREADER_H

#include "onnx/onnx_pb.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace zinc::frontend {

/// True when `path` names a model in ONNX's textual syntax (*.onnxtxt).
bool isTextModelPath(llvm::StringRef path);

/// Parses the file at `path` into `model`: protobuf binary, or onnx's
/// textual syntax for *.onnxtxt. External data is not read. The errors
/// ("cannot open: ...", "cannot parse the model: ...") do not name the file;
/// the caller adds it.
llvm::Error readModel(llvm::StringRef path, onnx::ModelProto &model);

} // namespace zinc::frontend

#endif
