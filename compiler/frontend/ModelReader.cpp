//===- ModelReader.cpp - Reads an ONNX model file into a ModelProto -------===//
#include "compiler/frontend/ModelReader.h"
#include "compiler/frontend/OnnxUtil.h"
#include "onnx/defs/parser.h"
#include "zinc/support/Error.h"
#include "zinc/support/ModelNesting.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include <climits>
#include <exception>
#include <string>

namespace zinc::frontend {

bool isTextModelPath(llvm::StringRef path) { return path.endswith(".onnxtxt"); }

/// onnx's parser reports "[ParseError at position (line: L column: C)]\n
/// Error context: <line>\n<what>"; this makes it "line L, column C: <what>
/// (near '<line>')". Anything else is folded onto one line unchanged.
static std::string formatParseError(llvm::StringRef msg) {
  llvm::StringRef rest = msg;
  if (!rest.consume_front("[ParseError at position (") || !rest.contains(")]"))
    return oneLine(msg);
  auto [position, afterPos] = rest.split(")]");
  afterPos = afterPos.ltrim();
  llvm::StringRef context;
  if (afterPos.consume_front("Error context:")) {
    auto [ctxLine, what] = afterPos.split('\n');
    context = ctxLine.trim();
    afterPos = what;
  }
  // "line: 3 column: 7" reads better as "line 3, column 7".
  std::string out;
  for (llvm::StringRef word : llvm::split(position, ' ')) {
    if (word == "column:")
      out += ", column";
    else if (word.consume_back(":"))
      out += word.str();
    else
      out += " " + word.str();
  }
  out += ": " + oneLine(afterPos);
  if (!context.empty())
    out += " (near '" + context.str() + "')";
  return out;
}

static llvm::Error parseText(llvm::StringRef text, onnx::ModelProto &model) {
  // OnnxParser reads a NUL-terminated string, so a NUL inside would silently
  // end the model early.
  if (text.contains('\0'))
    return makeError("cannot parse the model: the file contains a NUL byte "
                     "(a binary model must not be named *.onnxtxt)");
  // Before onnx's parser, which recurses once per nesting level.
  if (llvm::Error err = checkOnnxTextNesting(text))
    return addContext(std::move(err), "cannot parse the model");
  std::string buffer = text.str();
  try {
    onnx::OnnxParser parser(buffer.c_str());
    onnx::Common::Status status = parser.Parse(model);
    if (!status.IsOK())
      return makeError("cannot parse the model: " +
                       formatParseError(status.ErrorMessage()));
    if (!parser.EndOfInput())
      return makeError("cannot parse the model: unexpected text after the "
                       "model's graph");
  } catch (const std::exception &e) {
    // The parser converts numbers with std::stoll and friends, which throw
    // on out-of-range literals.
    return makeError("cannot parse the model: " + oneLine(e.what()));
  }
  return llvm::Error::success();
}

static llvm::Error parseBinary(llvm::StringRef bytes, onnx::ModelProto &model) {
  if (bytes.size() > static_cast<size_t>(INT_MAX))
    return makeError("cannot parse the model: the file is larger than 2 GiB, "
                     "which protobuf cannot hold; save the weights as "
                     "external data");
  if (!model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    if (llvm::Error err =
            checkProtobufNesting(*onnx::ModelProto::descriptor(), bytes))
      return addContext(std::move(err), "cannot parse the model");
    return makeError("cannot parse the model: not a valid ONNX protobuf (the "
                     "file is malformed or truncated)");
  }
  // Protobuf accepts many byte strings as a message of unknown fields; a
  // model with neither an IR version nor a graph is not a model.
  if (!model.has_ir_version() && !model.has_graph())
    return makeError("cannot parse the model: not an ONNX model (it has no "
                     "IR version and no graph)");
  return llvm::Error::success();
}

llvm::Error readModel(llvm::StringRef path, onnx::ModelProto &model) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                  /*RequiresNullTerminator=*/false);
  if (!file)
    return makeError("cannot open: " + file.getError().message());
  llvm::StringRef bytes = (*file)->getBuffer();
  if (isTextModelPath(path))
    return parseText(bytes, model);
  return parseBinary(bytes, model);
}

} // namespace zinc::frontend
