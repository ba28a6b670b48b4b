//===- SyncIo.cpp - Blocking pread/pwrite with retries, and I/O messages --===//
#include "IoEngine.h"
#include <cerrno>
#include <cstring>
#include <unistd.h>

namespace zinc::storage::detail {

std::string ioErrorMessage(llvm::StringRef path, IoKind kind, uint64_t offset,
                           uint64_t bytes, llvm::StringRef call, int errnum) {
  return (path + ": " + (kind == IoKind::Read ? "read" : "write") +
          " at offset " + llvm::Twine(offset) + " (" + llvm::Twine(bytes) +
          " bytes): " + call + ": " + std::strerror(errnum))
      .str();
}

std::string syncTransfer(int fd, llvm::StringRef path, IoKind kind,
                         uint64_t offset, uint8_t *host, uint64_t bytes) {
  const char *call = kind == IoKind::Read ? "pread" : "pwrite";
  uint64_t done = 0;
  while (done < bytes) {
    ssize_t n = kind == IoKind::Read
                    ? ::pread(fd, host + done, bytes - done, offset + done)
                    : ::pwrite(fd, host + done, bytes - done, offset + done);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN)
        continue;
      return ioErrorMessage(path, kind, offset + done, bytes - done, call,
                            errno);
    }
    // The file is preallocated to the tier's size, so no progress means the
    // file was truncated behind our back.
    if (n == 0)
      return (path + ": " + call + " at offset " + llvm::Twine(offset + done) +
              " (" + llvm::Twine(bytes - done) +
              " bytes) made no progress: the tier file ends early")
          .str();
    done += static_cast<uint64_t>(n);
  }
  return "";
}

} // namespace zinc::storage::detail
