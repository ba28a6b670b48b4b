//===- OutputFile.cpp - Writing the files users name, all or nothing ------===//
#include "zinc/support/OutputFile.h"
#include "zinc/support/Error.h"
#include "llvm/Support/FileSystem.h"
#include <csignal>
#include <unistd.h>

namespace zinc {

std::string stagingPathFor(llvm::StringRef path) {
  llvm::sys::fs::file_status status;
  if (!llvm::sys::fs::status(path, status) && llvm::sys::fs::exists(status) &&
      status.type() != llvm::sys::fs::file_type::regular_file)
    return path.str();
  // The pid keeps two processes writing the same file off each other's
  // staged bytes.
  return (path + ".tmp-" + llvm::Twine(::getpid())).str();
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
  std::string staged = stagingPathFor(path);
  std::error_code ec;
  llvm::raw_fd_ostream os(staged, ec);
  if (ec)
    return makeError(path + ": cannot write: " + ec.message());
  llvm::Error err = write(os);
  // The stream's own error is checked (and cleared) either way.
  llvm::Error closed = closeOutput(os, path);
  if (err || closed) {
    if (staged != path)
      llvm::sys::fs::remove(staged);
    if (err) {
      llvm::consumeError(std::move(closed));
      return err;
    }
    return closed;
  }
  return commitOutput(staged, path);
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
