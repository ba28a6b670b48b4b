//===- onnx-text.cpp - Fuzzes the ONNX frontend with the textual syntax -----===//
//
// The bytes are a model file as zinc-compile reads it (MODEL.onnxtxt,
// onnx's textual syntax): parse, checker, dimension binding, shape
// inference and folding, op checks and the IR. Anything may be refused, with an error; nothing may crash, hang
// or read out of bounds.
//
//===----------------------------------------------------------------------===//
#include "FuzzInputFile.h"
#include "zinc/frontend/OnnxImporter.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string &path = zinc::fuzz::writeInputFile("model.onnxtxt", data, size);
  zinc::frontend::ImportOptions opts;
  auto graph = zinc::frontend::importOnnxModel(path, opts);
  if (!graph)
    llvm::consumeError(graph.takeError());
  return 0;
}
