//===- FileInsideTest.cpp - Files named relative to a directory -----------===//
#include "zinc/support/FileInside.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include "gtest/gtest.h"
#include <sys/stat.h>
#include <unistd.h>

using namespace zinc;

namespace {
/// A model directory `m` (with `w.bin` in it) inside a scratch directory
/// that also holds `secret.txt`, outside `m`.
class FileInside : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("zinc-inside", root));
    ASSERT_FALSE(llvm::sys::fs::create_directory(at("m")));
    write("m/w.bin", "weights");
    write("secret.txt", "secret");
  }
  void TearDown() override { llvm::sys::fs::remove_directories(root); }

  std::string at(llvm::StringRef rel) const {
    llvm::SmallString<128> p(root);
    llvm::sys::path::append(p, rel);
    return std::string(p);
  }
  void write(llvm::StringRef rel, llvm::StringRef text) {
    std::error_code ec;
    llvm::raw_fd_ostream os(at(rel), ec);
    ASSERT_FALSE(ec);
    os << text;
  }
  void link(llvm::StringRef target, llvm::StringRef rel) {
    ASSERT_EQ(::symlink(target.str().c_str(), at(rel).c_str()), 0);
  }
  std::string openError(llvm::StringRef rel) {
    llvm::Expected<int> fd = openInside(at("m"), rel);
    if (fd) {
      ::close(*fd);
      return "";
    }
    return llvm::toString(fd.takeError());
  }
  std::string realRoot() {
    llvm::SmallString<128> real;
    EXPECT_FALSE(llvm::sys::fs::real_path(root, real));
    return std::string(real);
  }

  llvm::SmallString<128> root;
};
} // namespace

static std::string normalized(llvm::StringRef relative) {
  llvm::Expected<std::string> n = normalizeRelativePath(relative);
  return n ? *n : "error: " + llvm::toString(n.takeError());
}

// The text alone: dots go, climbing out or starting at the root does not.
TEST(RelativePath, TextMustStayBelowTheDirectory) {
  EXPECT_EQ(normalized("w.bin"), "w.bin");
  EXPECT_EQ(normalized("./a/./b/../w.bin"), "a/w.bin");
  EXPECT_EQ(normalized("/etc/passwd"), "error: is absolute");
  EXPECT_EQ(normalized("../w.bin"), "error: leaves the directory");
  EXPECT_EQ(normalized("a/../../w.bin"), "error: leaves the directory");
  EXPECT_EQ(normalized("a/.."), "error: leaves the directory");
  EXPECT_EQ(normalized(""), "error: is empty");
  EXPECT_EQ(normalized(llvm::StringRef("w\0.bin", 6)),
            "error: contains a NUL byte");
}

// A regular file in the directory opens; so does one reached through a
// symlink that stays inside.
TEST_F(FileInside, RegularFilesInsideOpen) {
  EXPECT_EQ(openError("w.bin"), "");
  link("w.bin", "m/alias.bin");
  EXPECT_EQ(openError("alias.bin"), "");
}

// A symlink out of the directory, of the file or of a directory on its
// way, is refused naming where it leads.
TEST_F(FileInside, SymlinksOutAreRefused) {
  link(at("secret.txt"), "m/evil.bin");
  EXPECT_EQ(openError("evil.bin"), "resolves to '" + realRoot() +
                                       "/secret.txt', outside '" + realRoot() +
                                       "/m'");
  link(root, "m/up");
  EXPECT_EQ(openError("up/secret.txt"), "resolves to '" + realRoot() +
                                            "/secret.txt', outside '" +
                                            realRoot() + "/m'");
  // The directory itself is not a file inside it.
  link(".", "m/self");
  EXPECT_EQ(openError("self"), "resolves to '" + realRoot() + "/m', outside '" +
                                   realRoot() + "/m'");
}

// A FIFO is refused at once (an open without O_NONBLOCK would wait for a
// writer forever), and so are directories and missing files.
TEST_F(FileInside, OnlyRegularFiles) {
  ASSERT_EQ(::mkfifo(at("m/fifo").c_str(), 0600), 0);
  EXPECT_EQ(openError("fifo"), "is not a regular file");
  ASSERT_FALSE(llvm::sys::fs::create_directory(at("m/sub")));
  EXPECT_EQ(openError("sub"), "is not a regular file");
  EXPECT_EQ(openError("missing.bin"), "No such file or directory");
}

// A model directory that is itself a symlink is taken where it leads: the
// files must be inside its real path.
TEST_F(FileInside, TheDirectoryIsResolvedToo) {
  link(at("m"), "m-link");
  llvm::Expected<std::string> real = resolveInside(at("m-link"), "w.bin");
  ASSERT_TRUE(static_cast<bool>(real)) << llvm::toString(real.takeError());
  EXPECT_EQ(*real, realRoot() + "/m/w.bin");
}
