//===- TierFile.h - Creating and removing the tier's file (internal) ------===//
#ifndef ZINC_RUNTIME_STORAGE_TIERFILE_H
#define ZINC_RUNTIME_STORAGE_TIERFILE_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include <cstdint>
#include <functional>
#include <string>

namespace zinc::storage::detail {

/// An open, preallocated tier file.
struct TierFile {
  int fd = -1;
  std::string path;
  /// Opened with O_DIRECT, and a probe transfer through it succeeded.
  bool direct = false;
};

/// Creates `<dir>/zinc-nvme-<pid>-<n>.tier` of `bytes` (a multiple of 4096)
/// bytes with its blocks allocated, opened with O_DIRECT unless
/// `forceBuffered` or the filesystem refuses it (then `warn` is told once).
llvm::Expected<TierFile>
createTierFile(llvm::StringRef dir, uint64_t bytes, bool forceBuffered,
               const std::function<void(llvm::StringRef)> &warn);

/// Closes the file and, unless `keep`, removes it.
void closeTierFile(TierFile &file, bool keep);

} // namespace zinc::storage::detail

#endif
