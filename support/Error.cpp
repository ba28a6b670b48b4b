//===- Error.cpp - Diagnostic helpers -------------------------------------===//
#include "zinc/support/Error.h"
#include "llvm/Support/raw_ostream.h"

namespace zinc {

// Standard error is unbuffered, so each `<<` is its own write(2). Under
// mpirun every rank shares one pipe, and piecewise writes from two ranks
// interleave mid-line. One write per diagnostic line is atomic on a pipe
// (well under PIPE_BUF), so each rank's line arrives whole.
static void writeWholeLine(llvm::StringRef tool, llvm::StringRef kind,
                           const llvm::Twine &msg) {
  std::string line = (tool + ": " + kind + ": " + msg + "\n").str();
  llvm::errs() << line;
}

char ContextualError::ID = 0;

llvm::Error addContext(llvm::Error err, const llvm::Twine &context) {
  if (!err)
    return err;
  if (err.isA<ContextualError>())
    return llvm::handleErrors(std::move(err), [&](std::unique_ptr<ContextualError> e) {
      e->prependContext(context);
      return llvm::Error(std::move(e));
    });
  std::string msg = llvm::toString(std::move(err));
  return makeError(context + ": " + msg);
}

void printError(llvm::StringRef tool, llvm::Error err) {
  llvm::handleAllErrors(std::move(err), [&](const llvm::ErrorInfoBase &e) {
    writeWholeLine(tool, "error", e.message());
  });
}

void printWarning(llvm::StringRef tool, const llvm::Twine &msg) {
  writeWholeLine(tool, "warning", msg);
}

void printNote(llvm::StringRef tool, const llvm::Twine &msg) {
  writeWholeLine(tool, "note", msg);
}

} // namespace zinc
