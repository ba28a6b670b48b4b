//===- BoundedJson.h - the one way zinc parses JSON it did not write ------===//
//
// llvm::json::parse recurses once per nesting level, so a file of 100k
// opening brackets (a --hw description, a checkpoint manifest, a
// safetensors header) overflows the stack. Every JSON zinc reads goes
// through parseJson, which measures the nesting first and refuses a text
// nested deeper than any file zinc reads needs.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_SUPPORT_BOUNDEDJSON_H
#define ZINC_SUPPORT_BOUNDEDJSON_H

#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

namespace zinc {

/// Deepest nesting of arrays and objects parseJson accepts. zinc's own
/// files nest a few levels; this leaves room for any sane hand-written one.
constexpr unsigned kMaxJsonDepth = 256;

/// Parses `text` as JSON. A text nested deeper than kMaxJsonDepth is
/// refused with "nested too deep (more than N levels)" before the
/// recursive parser sees it; any other error is llvm::json's message.
llvm::Expected<llvm::json::Value> parseJson(llvm::StringRef text);

} // namespace zinc

#endif
