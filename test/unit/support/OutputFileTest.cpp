//===- OutputFileTest.cpp - Staging output files beside their path --------===//
#include "zinc/support/OutputFile.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "gtest/gtest.h"
#include <unistd.h>

using namespace zinc;

namespace {
/// A fresh directory, removed with everything in it.
class TempDir {
public:
  TempDir() {
    EXPECT_FALSE(llvm::sys::fs::createUniqueDirectory("zinc-output", path));
  }
  ~TempDir() { llvm::sys::fs::remove_directories(path); }
  std::string file(llvm::StringRef name) const {
    llvm::SmallString<128> p(path);
    llvm::sys::path::append(p, name);
    return std::string(p);
  }

private:
  llvm::SmallString<128> path;
};
} // namespace

static std::string contents(const std::string &path) {
  auto buf = llvm::MemoryBuffer::getFile(path);
  return buf ? (*buf)->getBuffer().str() : "<unreadable>";
}

static void writeText(const std::string &path, llvm::StringRef text) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  ASSERT_FALSE(ec);
  os << text;
}

static llvm::Error writeHello(const std::string &path) {
  return writeOutputFile(path, [](llvm::raw_ostream &os) {
    os << "hello";
    return llvm::Error::success();
  });
}

// Symlinks planted under the names a pid-numbered staging file would take
// (this process's pid, and its neighbours) are left alone: the file they
// point to keeps its bytes and the output lands where it was asked to.
TEST(OutputFile, PlantedSymlinksAtGuessableNamesAreNotFollowed) {
  TempDir dir;
  std::string victim = dir.file("victim.txt"), out = dir.file("out.json");
  writeText(victim, "precious");
  for (int pid = ::getpid() - 2; pid <= ::getpid() + 2; ++pid)
    ASSERT_FALSE(llvm::sys::fs::create_link(victim, out + ".tmp-" +
                                                        std::to_string(pid)));
  ASSERT_FALSE(static_cast<bool>(writeHello(out)));
  EXPECT_EQ(contents(victim), "precious");
  EXPECT_EQ(contents(out), "hello");
}

// Each staging file is new, under a name of its own: two staged at once for
// one path do not share bytes, and neither is the path itself.
TEST(OutputFile, StagingFilesAreNewAndDistinct) {
  TempDir dir;
  std::string out = dir.file("plan.zplan");
  writeText(out, "old");
  auto first = stageOutput(out);
  auto second = stageOutput(out);
  ASSERT_TRUE(static_cast<bool>(first)) << llvm::toString(first.takeError());
  ASSERT_TRUE(static_cast<bool>(second)) << llvm::toString(second.takeError());
  EXPECT_NE(first->staged, second->staged);
  EXPECT_NE(first->staged, out);
  EXPECT_TRUE(llvm::StringRef(first->staged).startswith(out + ".tmp-"));
  EXPECT_EQ(contents(first->staged), "");
  EXPECT_EQ(contents(out), "old");
  ::close(first->fd);
  ::close(second->fd);
}

// A failed write leaves neither the staging file nor a changed output.
TEST(OutputFile, AFailedWriteLeavesNothingBehind) {
  TempDir dir;
  std::string out = dir.file("report.json");
  writeText(out, "old");
  llvm::Error err = writeOutputFile(out, [](llvm::raw_ostream &os) {
    os << "half";
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "stop");
  });
  EXPECT_EQ(llvm::toString(std::move(err)), "stop");
  EXPECT_EQ(contents(out), "old");
  std::error_code ec;
  int entries = 0;
  llvm::SmallString<128> parent(llvm::sys::path::parent_path(out));
  for (llvm::sys::fs::directory_iterator it(parent, ec), end; !ec && it != end;
       it.increment(ec))
    ++entries;
  EXPECT_EQ(entries, 1);
}

// A device is written in place: renaming over it would replace it.
TEST(OutputFile, DevicesAreWrittenInPlace) {
  auto staged = stageOutput("/dev/null");
  ASSERT_TRUE(static_cast<bool>(staged)) << llvm::toString(staged.takeError());
  EXPECT_EQ(staged->staged, "/dev/null");
  ::close(staged->fd);
  EXPECT_FALSE(static_cast<bool>(writeHello("/dev/null")));
}

// A directory that does not exist is one line naming the path.
TEST(OutputFile, AMissingDirectoryIsOneLine) {
  TempDir dir;
  std::string out = dir.file("no/such/dir/out.json");
  EXPECT_EQ(llvm::toString(writeHello(out)),
            out + ": cannot write: No such file or directory");
}
