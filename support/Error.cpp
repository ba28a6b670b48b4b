//===- Error.cpp - Diagnostic helpers -------------------------------------===//
#include "zinc/support/Error.h"
#include "llvm/Support/raw_ostream.h"

namespace zinc {

llvm::Error addContext(llvm::Error err, const llvm::Twine &context) {
  if (!err)
    return err;
  std::string msg = llvm::toString(std::move(err));
  return makeError(context + ": " + msg);
}

void printError(llvm::StringRef tool, llvm::Error err) {
  llvm::handleAllErrors(std::move(err), [&](const llvm::ErrorInfoBase &e) {
    llvm::errs() << tool << ": error: " << e.message() << "\n";
  });
}

void printWarning(llvm::StringRef tool, const llvm::Twine &msg) {
  llvm::errs() << tool << ": warning: " << msg << "\n";
}

} // namespace zinc
