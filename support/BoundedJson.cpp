//===- BoundedJson.cpp - JSON parsing with its nesting depth bounded ------===//
#include "zinc/support/BoundedJson.h"
#include "zinc/support/Error.h"
#include "llvm/ADT/Twine.h"

namespace zinc {

/// The deepest nesting of `[` and `{` outside strings. Brackets inside a
/// string (escapes included) do not count; a malformed text is measured as
/// far as it goes and left to the parser to refuse.
static unsigned nestingDepth(llvm::StringRef text) {
  unsigned depth = 0, deepest = 0;
  bool inString = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (inString) {
      if (c == '\\')
        ++i; // the escaped character cannot end the string
      else if (c == '"')
        inString = false;
      continue;
    }
    if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > kMaxJsonDepth)
        return deepest; // no need to read further
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

llvm::Expected<llvm::json::Value> parseJson(llvm::StringRef text) {
  if (nestingDepth(text) > kMaxJsonDepth)
    return makeError("nested too deep (more than " + llvm::Twine(kMaxJsonDepth) +
                     " levels)");
  return llvm::json::parse(text);
}

} // namespace zinc
