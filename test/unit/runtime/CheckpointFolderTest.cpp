//===- CheckpointFolderTest.cpp - The lock, removal and abandoned saves ---===//
#include "PlanBuilder.h"
#include "zinc/runtime/Checkpoint.h"
#include "zinc/runtime/CheckpointFolder.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include <algorithm>
#include <unistd.h>

using namespace zinc;
using namespace zinc::rt;
using namespace zinc::rt::test;

namespace {

class CheckpointFolderTest : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("zinc-ckpt-folder", dir));
  }
  void TearDown() override { llvm::sys::fs::remove_directories(dir); }

  std::string path(llvm::StringRef name) { return (dir + "/" + name).str(); }
  void write(llvm::StringRef name, llvm::StringRef text) {
    std::error_code ec;
    llvm::raw_fd_ostream os(path(name), ec);
    ASSERT_FALSE(ec);
    os << text;
  }
  std::vector<std::string> entries() {
    std::vector<std::string> names;
    std::error_code ec;
    for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec;
         it.increment(ec))
      names.push_back(llvm::sys::path::filename(it->path()).str());
    std::sort(names.begin(), names.end());
    return names;
  }

  llvm::SmallString<128> dir;
};

static std::string hostName() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return host;
}

// While one holder has the directory, a second is refused with the first's
// pid and host; once it is released the lock file is gone and the
// directory can be taken again.
TEST_F(CheckpointFolderTest, SecondHolderIsRefusedNamingTheFirst) {
  auto first = CheckpointLock::acquire(dir);
  ASSERT_TRUE(static_cast<bool>(first)) << llvm::toString(first.takeError());
  std::string refused = errorOf(CheckpointLock::acquire(dir));
  EXPECT_NE(refused.find(dir.str().str() + ": --checkpoint-dir is in use by another "
                                           "zinc-run (pid " +
                         std::to_string(::getpid()) + " on host " + hostName() +
                         ", since "),
            std::string::npos)
      << refused;
  first->reset();
  EXPECT_FALSE(llvm::sys::fs::exists(path(".zinc-lock")));
  auto again = CheckpointLock::acquire(dir);
  EXPECT_TRUE(static_cast<bool>(again)) << llvm::toString(again.takeError());
}

// Removing a checkpoint removes zinc's files only: a folder with a user's
// file in it stays, with that file.
TEST_F(CheckpointFolderTest, RemovalKeepsWhatZincDidNotWrite) {
  ASSERT_FALSE(llvm::sys::fs::create_directory(path("step-1")));
  write("step-1/manifest.json", "{}");
  write("step-1/state.safetensors", "x");
  write("step-1/notes.txt", "mine");
  auto gone = removeCheckpointFiles(path("step-1"));
  ASSERT_TRUE(static_cast<bool>(gone));
  EXPECT_FALSE(*gone);
  EXPECT_TRUE(llvm::sys::fs::exists(path("step-1/notes.txt")));
  EXPECT_FALSE(llvm::sys::fs::exists(path("step-1/manifest.json")));
  ASSERT_FALSE(llvm::sys::fs::create_directory(path("step-2")));
  write("step-2/model.safetensors", "x");
  gone = removeCheckpointFiles(path("step-2"));
  ASSERT_TRUE(static_cast<bool>(gone));
  EXPECT_TRUE(*gone);
  EXPECT_FALSE(llvm::sys::fs::exists(path("step-2")));
}

// A stop asked at any point of a checkpoint abandons it: an error, no
// partial folder, and the previous checkpoint left whole as the newest.
TEST_F(CheckpointFolderTest, StopAbandonsTheCheckpointAndLeavesNothing) {
  PlanBuilder b;
  int x = b.tensor("x", {8});
  int s = b.tensor("s", {8}, plan::TIER_GPU, 1, plan::ROLE_STATE);
  int t = b.tensor("t", {8}, plan::TIER_GPU, 1, plan::ROLE_STATE);
  int y = b.tensor("y", {8});
  b.add("add", "Add", {x, s}, {y});
  (void)t;
  auto program = loadOrFail(b.finish());
  ASSERT_TRUE(program);
  RunIdentity id{planChecksum(*program), newRunId()};
  ASSERT_EQ(messageOf(saveCheckpoint(*program, dir, 1, 0, 0, id, {})), "");
  for (int stopAt = 1; stopAt <= 4; ++stopAt) {
    int polls = 0;
    auto stop = [&] { return ++polls >= stopAt; };
    std::string err = messageOf(saveCheckpoint(*program, dir, 2, 0, 0, id, {}, stop));
    EXPECT_NE(err.find("checkpoint after step 2: abandoned: the run is stopping"),
              std::string::npos)
        << "stop at poll " << stopAt << ": " << err;
    EXPECT_EQ(entries(), std::vector<std::string>{"step-1"}) << "stop at poll " << stopAt;
  }
  auto identity = readRunIdentity(path("step-1"));
  ASSERT_TRUE(identity.hasValue());
  EXPECT_EQ(identity->run, id.run);
  EXPECT_EQ(identity->plan, id.plan);
}

} // namespace
