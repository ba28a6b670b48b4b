//===- OutputFile.cpp - Writing the files users name, all or nothing ------===//
#include "zinc/support/OutputFile.h"
#include "zinc/support/Error.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <random>
#include <unistd.h>

namespace zinc {

/// A name nobody can predict: O_EXCL and O_NOFOLLOW already keep zinc off
/// whatever is planted under a name, and unpredictability keeps planted
/// names from making every attempt fail.
static std::string randomSuffix() {
  std::random_device device;
  uint64_t bits = (static_cast<uint64_t>(device()) << 32) | device();
  return llvm::utohexstr(bits, /*LowerCase=*/true);
}

llvm::Expected<StagedOutput> stageOutput(llvm::StringRef path) {
  llvm::sys::fs::file_status status;
  if (!llvm::sys::fs::status(path, status) && llvm::sys::fs::exists(status) &&
      status.type() != llvm::sys::fs::file_type::regular_file) {
    int fd = ::open(path.str().c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0)
      return makeError(path + ": cannot write: " + std::strerror(errno));
    return StagedOutput{path.str(), fd};
  }
  // A handful of collisions means something other than chance is at work;
  // give up with what the last attempt said.
  constexpr int kAttempts = 64;
  int err = 0;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    std::string staged = (path + ".tmp-" + randomSuffix()).str();
    int fd = ::open(staged.c_str(),
                    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd >= 0)
      return StagedOutput{std::move(staged), fd};
    err = errno;
    if (err != EEXIST && err != EINTR)
      break;
  }
  return makeError(path + ": cannot write: " + std::strerror(err));
}

static llvm::Error outputError(llvm::raw_fd_ostream &os, llvm::StringRef path) {
  if (!os.has_error())
    return llvm::Error::success();
  std::error_code ec = os.error();
  os.clear_error();
  return makeError(path + ": cannot write: " + ec.message());
}

llvm::Error checkOutput(llvm::raw_fd_ostream &os, llvm::StringRef path) {
  os.flush();
  return outputError(os, path);
}

llvm::Error closeOutput(llvm::raw_fd_ostream &os, llvm::StringRef path) {
  os.close();
  return outputError(os, path);
}

llvm::Error commitOutput(llvm::StringRef staged, llvm::StringRef path) {
  if (staged == path)
    return llvm::Error::success();
  if (std::error_code ec = llvm::sys::fs::rename(staged, path)) {
    llvm::sys::fs::remove(staged);
    return makeError(path + ": cannot write: " + ec.message());
  }
  return llvm::Error::success();
}

llvm::Error
writeOutputFile(llvm::StringRef path,
                llvm::function_ref<llvm::Error(llvm::raw_ostream &)> write) {
  llvm::Expected<StagedOutput> staged = stageOutput(path);
  if (!staged)
    return staged.takeError();
  llvm::raw_fd_ostream os(staged->fd, /*shouldClose=*/true);
  llvm::Error err = write(os);
  // The stream's own error is checked (and cleared) either way.
  llvm::Error closed = closeOutput(os, path);
  if (err || closed) {
    if (staged->staged != path)
      llvm::sys::fs::remove(staged->staged);
    if (err) {
      llvm::consumeError(std::move(closed));
      return err;
    }
    return closed;
  }
  return commitOutput(staged->staged, path);
}

void reportFileSizeLimitAsWriteErrors() { ::signal(SIGXFSZ, SIG_IGN); }

int finishStandardOutput(llvm::StringRef tool, int code) {
  llvm::raw_fd_ostream &out = llvm::outs();
  out.flush();
  if (!out.has_error())
    return code;
  std::error_code ec = out.error();
  out.clear_error();
  llvm::errs() << tool
               << ": error: standard output: cannot write: " << ec.message()
               << "\n";
  return 1;
}

} // namespace zinc
