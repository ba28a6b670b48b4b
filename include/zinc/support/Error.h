//===- Error.h - The one way zinc libraries build user-facing errors ------===//
//
// Libraries return llvm::Error; the message is the diagnostic without the
// tool prefix, e.g. "model.onnx: node 'MatMul_3' (MatMul): input 1 has
// shape [4,5], expected [5,?]". Tools print it as "<tool>: error: <msg>".
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_SUPPORT_ERROR_H
#define ZINC_SUPPORT_ERROR_H

#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

namespace zinc {

/// An error carrying a one-line diagnostic.
inline llvm::Error makeError(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

/// An error a caller tells apart by its type (the planner's "does not fit"),
/// whose message still takes the context the layers above add: addContext
/// prefixes it in place instead of flattening it into a string.
class ContextualError : public llvm::ErrorInfo<ContextualError> {
public:
  static char ID;
  virtual void prependContext(const llvm::Twine &context) = 0;
};

/// Prefixes the message of `err` with `context + ": "` (a file, a node). A
/// ContextualError keeps its type.
llvm::Error addContext(llvm::Error err, const llvm::Twine &context);

/// These print each diagnostic with a single write, so lines from ranks
/// sharing one stderr pipe never interleave.
/// Prints "<tool>: error: <message>" for each error in `err` to stderr.
void printError(llvm::StringRef tool, llvm::Error err);
/// Prints "<tool>: warning: <message>" to stderr.
void printWarning(llvm::StringRef tool, const llvm::Twine &msg);
/// Prints "<tool>: note: <message>" to stderr.
void printNote(llvm::StringRef tool, const llvm::Twine &msg);

} // namespace zinc

#endif
