//===- HostMemoryTest.cpp - Cgroup memory limits and the start-up check ---===//
#include "zinc/runtime/HostMemory.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include "gtest/gtest.h"

using namespace zinc;
using namespace zinc::rt;

namespace {

/// A fake /proc/self/cgroup and cgroup filesystem in a temporary directory.
class FakeCgroups : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("zinc-cgroup", root));
  }
  void TearDown() override { llvm::sys::fs::remove_directories(root); }

  void write(llvm::StringRef relative, llvm::StringRef text) {
    llvm::SmallString<128> path(root);
    llvm::sys::path::append(path, relative);
    ASSERT_FALSE(
        llvm::sys::fs::create_directories(llvm::sys::path::parent_path(path)));
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    ASSERT_FALSE(ec);
    os << text;
  }
  std::string path(llvm::StringRef relative) {
    return (root + "/" + relative).str();
  }

  llvm::SmallString<128> root;
};

// cgroup v2: the tightest memory.max over the process's cgroup and its
// ancestors; "max" is no limit.
TEST_F(FakeCgroups, V2TakesTheTightestAncestor) {
  write("proc", "0::/jobs/run7\n");
  write("fs/memory.max", "max\n");
  write("fs/jobs/memory.max", "8589934592\n");
  write("fs/jobs/run7/memory.max", "max\n");
  auto limit = readCgroupMemoryLimit(path("proc"), path("fs"));
  ASSERT_TRUE(limit.hasValue());
  EXPECT_EQ(limit->bytes, 8589934592u);
  EXPECT_EQ(limit->source, path("fs/jobs/memory.max"));
}

// cgroup v1: the memory controller's hierarchy (listed with others on its
// line); v1's "unlimited" (a page-rounded INT64_MAX) is no limit, and a
// path that is not mounted (inside a container) falls back to the root.
TEST_F(FakeCgroups, V1ReadsTheMemoryHierarchy) {
  write("proc", "5:cpu,cpuacct:/elsewhere\n4:memory:/process_api/abc\n");
  write("fs/memory/memory.limit_in_bytes", "9223372036854771712\n");
  EXPECT_FALSE(readCgroupMemoryLimit(path("proc"), path("fs")).hasValue());
  write("fs/memory/memory.limit_in_bytes", "4294967296\n");
  auto limit = readCgroupMemoryLimit(path("proc"), path("fs"));
  ASSERT_TRUE(limit.hasValue());
  EXPECT_EQ(limit->bytes, 4294967296u);
}

// No cgroup file at all: no limit.
TEST_F(FakeCgroups, MissingFilesMeanNoLimit) {
  EXPECT_FALSE(readCgroupMemoryLimit(path("absent"), path("fs")).hasValue());
}

// The diagnostic names the need, its parts, the limit and its source, and
// what fits, as a size the compiler's flags take.
TEST(HostMemory, TooLargeSaysWhatFits) {
  constexpr uint64_t GiB = uint64_t(1) << 30;
  HostMemoryNeed need{30 * GiB, 0};
  MemoryLimit limit{22 * GiB + GiB / 2, "/sys/fs/cgroup/memory.max"};
  llvm::Error err = checkHostMemory(need, limit);
  ASSERT_TRUE(static_cast<bool>(err));
  EXPECT_EQ(
      llvm::toString(std::move(err)),
      "the plan needs 30.00 GiB of host memory (the cpu tier's proven peak "
      "30.00 GiB), and this machine has a cgroup limit of 22.50 GiB "
      "(/sys/fs/cgroup/memory.max): compile it with --cpu-mem=22GiB or less "
      "(offloading the rest to NVMe), or run it where it fits");
  EXPECT_FALSE(static_cast<bool>(
      checkHostMemory(need, MemoryLimit{30 * GiB, "physical memory"})));
}

// The emulated GPU tier counts on the cpu backend only.
TEST(HostMemory, NeedCountsTheEmulatedGpuTier) {
  plan::Plan plan;
  auto *gpu = plan.add_tiers();
  gpu->set_tier(plan::TIER_GPU);
  gpu->set_peak(1000);
  auto *cpu = plan.add_tiers();
  cpu->set_tier(plan::TIER_CPU);
  cpu->set_peak(500);
  plan.add_tensors()->set_tier(plan::TIER_CPU);
  EXPECT_EQ(hostMemoryNeed(plan, /*gpuTierInHostMemory=*/true).total(), 1500u);
  EXPECT_EQ(hostMemoryNeed(plan, /*gpuTierInHostMemory=*/false).total(), 500u);
}

} // namespace
