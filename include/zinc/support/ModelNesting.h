//===- ModelNesting.h - Model files nested deeper than a parser survives --===//
//
// onnx's text parser recurses once per nested graph or type, so an `If`
// nested 10k deep overflows the stack; protobuf refuses a binary message
// nested past its limit, but says only that parsing failed. These measure
// the nesting without recursing, so a model too deep for either is refused
// as "nested too deep" with the limit, never a crash or "malformed".
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_SUPPORT_MODELNESTING_H
#define ZINC_SUPPORT_MODELNESTING_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace google::protobuf {
class Descriptor;
} // namespace google::protobuf

namespace zinc {

/// Deepest bracket nesting accepted in the ONNX textual syntax. Each nested
/// graph or type adds one unclosed bracket, so this is the deepest nesting
/// of subgraphs (or sequence types) a text model may have; a few thousand
/// overflow onnx's parser.
constexpr unsigned kMaxOnnxTextDepth = 100;

/// Refuses an ONNX text whose `(`, `[` and `{` nest deeper than
/// kMaxOnnxTextDepth, outside string literals and `#` comments as onnx's
/// parser reads them: "nested too deep (more than N levels of brackets)".
llvm::Error checkOnnxTextNesting(llvm::StringRef text);

/// The nesting protobuf's parser accepts
/// (io::CodedInputStream::GetDefaultRecursionLimit()).
constexpr unsigned kProtobufDepthLimit = 100;

/// Whether `bytes`, a serialised `type` that protobuf refused, holds
/// messages nested deeper than kProtobufDepthLimit: walks the wire format
/// with an explicit stack, following the fields `type` declares as
/// messages. Returns "nested too deep (more than N levels of messages, the
/// limit of protobuf)" if so; success when the bytes are wrong some other
/// way (which the caller reports).
llvm::Error checkProtobufNesting(const google::protobuf::Descriptor &type,
                                 llvm::StringRef bytes);

} // namespace zinc

#endif
