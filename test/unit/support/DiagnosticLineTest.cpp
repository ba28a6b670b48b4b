//===- DiagnosticLineTest.cpp - Diagnostics from ranks sharing stderr -----===//
//
// Under mpirun every rank writes to one stderr pipe. A diagnostic written
// piece by piece interleaves with another rank's mid-line (CI once read
// "zinc-runzinc-run: error: : error: the plan was compiled for ..."), so
// each must reach the pipe whole.
//
//===----------------------------------------------------------------------===//
#include "zinc/support/Error.h"
#include "gtest/gtest.h"
#include <string>
#include <sys/wait.h>
#include <unistd.h>

namespace zinc {
namespace {

TEST(DiagnosticLine, RanksSharingAPipeKeepTheirLinesWhole) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const int linesEach = 200;
  int writers = 0;
  for (int w = 0; w < 4; ++w) {
    pid_t pid = ::fork();
    if (pid < 0)
      break; // drain and reap the ones started, then fail below
    ++writers;
    if (pid == 0) {
      ::close(fds[0]);
      ::dup2(fds[1], 2);
      for (int i = 0; i < linesEach; ++i) {
        printError("zinc-run", makeError("rank " + llvm::Twine(w) + " line " + llvm::Twine(i)));
        printWarning("zinc-run", "rank " + llvm::Twine(w));
        printNote("zinc-run", "rank " + llvm::Twine(w));
      }
      ::_exit(0);
    }
  }
  ::close(fds[1]);
  EXPECT_EQ(writers, 4) << "fork failed";
  std::string all;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;)
    all.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  for (int w = 0; w < writers; ++w) {
    int status = 0;
    ::wait(&status);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  int lines = 0;
  for (size_t at = 0; at < all.size();) {
    size_t end = all.find('\n', at);
    ASSERT_NE(end, std::string::npos) << "a line without its end";
    llvm::StringRef line(all.data() + at, end - at);
    bool whole = (line.startswith("zinc-run: error: rank ") && line.contains(" line ")) ||
                 line.startswith("zinc-run: warning: rank ") ||
                 line.startswith("zinc-run: note: rank ");
    EXPECT_TRUE(whole) << "interleaved: '" << line.str() << "'";
    EXPECT_EQ(line.count("zinc-run"), 1u) << line.str();
    ++lines;
    at = end + 1;
  }
  EXPECT_EQ(lines, writers * linesEach * 3);
}

} // namespace
} // namespace zinc
