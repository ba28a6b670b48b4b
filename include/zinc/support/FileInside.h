//===- FileInside.h - Files a directory's contents may name ---------------===//
//
// A model's external data and a plan's weights are named relative to the
// model's directory by files other people write. These helpers are the one
// place such a name becomes a file: its text must stay below the
// directory, realpath(3) of the result must lie inside the directory's own
// real path (a symlink out of it is refused), and what is opened must be a
// regular file, opened without following a symlink swapped in meanwhile and
// without blocking on a FIFO (CVE-2024-27318 is ONNX's instance of this).
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_SUPPORT_FILEINSIDE_H
#define ZINC_SUPPORT_FILEINSIDE_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include <string>

namespace zinc {

/// `relative` with "." components removed, when its text names something
/// below a directory: not empty, not absolute, no ".." left once dots are
/// removed. Otherwise an error saying which ("is absolute", "leaves the
/// directory").
llvm::Expected<std::string> normalizeRelativePath(llvm::StringRef relative);

/// A path whose real location is outside the directory it was named in.
class PathOutsideError : public llvm::ErrorInfo<PathOutsideError> {
public:
  static char ID;
  PathOutsideError(std::string real, std::string dir)
      : real(std::move(real)), dir(std::move(dir)) {}
  void log(llvm::raw_ostream &os) const override;
  std::error_code convertToErrorCode() const override {
    return llvm::inconvertibleErrorCode();
  }
  std::string real, dir;
};

/// The real path of `dir`/`relative` (relative as normalizeRelativePath
/// accepts it). Errors: normalizeRelativePath's; the system's reason when
/// either path cannot be resolved ("No such file or directory");
/// PathOutsideError when it resolves outside realpath(`dir`).
llvm::Expected<std::string> resolveInside(llvm::StringRef dir,
                                          llvm::StringRef relative);

/// Opens `dir`/`relative` for reading: resolveInside's path, opened with
/// O_NOFOLLOW | O_NONBLOCK and required by fstat to be a regular file
/// ("is not a regular file"). Returns the descriptor, which the caller
/// closes.
llvm::Expected<int> openInside(llvm::StringRef dir, llvm::StringRef relative);

} // namespace zinc

#endif
