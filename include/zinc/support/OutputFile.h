//===- OutputFile.h - Writing the files users name, all or nothing --------===//
//
// Every file zinc writes at a user's request (plans, reports, safetensors,
// metrics, traces) goes through here, so that a full disk, a missing
// directory or a device ends in one diagnostic, "PATH: cannot write: REASON",
// and never in LLVM's abort on a stream error nobody looked at.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_SUPPORT_OUTPUTFILE_H
#define ZINC_SUPPORT_OUTPUTFILE_H

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"
#include <string>

namespace zinc {

/// The bytes of a file being written: `fd` is open for writing on `staged`,
/// which is `path` itself or a new file beside it (stageOutput).
struct StagedOutput {
  std::string staged;
  int fd = -1;
};

/// Opens where the bytes of `path` are written before they replace it.
/// When `path` is a regular file or does not exist yet: a new file
/// `PATH.tmp-<random>` beside it, created with O_CREAT | O_EXCL | O_NOFOLLOW
/// (another name on EEXIST), so that a failed or interrupted write leaves the
/// old file whole and nobody's file or symlink planted under a name zinc
/// could guess is opened. When `path` is something else (a device, a pipe),
/// which a rename would replace: `path` itself. Errors are "PATH: cannot
/// write: REASON".
llvm::Expected<StagedOutput> stageOutput(llvm::StringRef path);

/// Closes `os` and turns a failure of any write to it into "PATH: cannot
/// write: REASON", clearing the stream's error (whose destructor would
/// otherwise abort the process).
llvm::Error closeOutput(llvm::raw_fd_ostream &os, llvm::StringRef path);

/// The same without closing: flushes and checks (streams kept open, such as
/// --metrics, after each record).
llvm::Error checkOutput(llvm::raw_fd_ostream &os, llvm::StringRef path);

/// Writes `path` with what `write` prints, all or nothing (stageOutput):
/// on any failure, `write`'s own included, the staged bytes are removed and
/// `path` is left as it was.
llvm::Error
writeOutputFile(llvm::StringRef path,
                llvm::function_ref<llvm::Error(llvm::raw_ostream &)> write);

/// Moves the staged bytes of `path` into place (nothing to do when they
/// were written in place); removes them on failure.
llvm::Error commitOutput(llvm::StringRef staged, llvm::StringRef path);

/// Makes a write past the file-size limit (RLIMIT_FSIZE, `ulimit -f`) fail
/// with EFBIG, reported like any write error, instead of killing the process
/// with SIGXFSZ (which LLVM's crash handler would turn into a stack dump).
/// Call after llvm::InitLLVM, which installs that handler.
void reportFileSizeLimitAsWriteErrors();

/// A tool's exit status once its standard output is flushed: `code`, or 1
/// with "TOOL: error: standard output: cannot write: REASON" on stderr when
/// a write to it failed (a full disk behind a redirection, a closed pipe).
int finishStandardOutput(llvm::StringRef tool, int code);

} // namespace zinc

#endif
