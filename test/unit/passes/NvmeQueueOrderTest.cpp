//===- NvmeQueueOrderTest.cpp - Fetches pass the NVMe link's other traffic ===//
#include "zinc/passes/NvmeQueueOrder.h"
#include "zinc/ir/Parser.h"
#include "gtest/gtest.h"
#include <string>
#include <vector>

using namespace zinc;

namespace {

struct Reordered {
  std::vector<std::string> nvme; // The NVMe stream's order, by node name.
  std::vector<std::string> all;
  size_t moved = 0;
};

Reordered reorder(const std::string &text, double lead = 1) {
  auto graph = ir::parseGraph(text, "test.zir");
  EXPECT_TRUE(static_cast<bool>(graph)) << llvm::toString(graph.takeError());
  auto hw = loadHardware("dgx2-v100");
  EXPECT_TRUE(static_cast<bool>(hw)) << llvm::toString(hw.takeError());
  Reordered r;
  r.moved = passes::letFetchesPassNvmeTraffic(**graph, *hw, lead);
  for (const ir::Node *n : (*graph)->nodes()) {
    r.all.push_back(n->name);
    if (n->stream == ir::Stream::Nvme)
      r.nvme.push_back(n->name);
  }
  return r;
}

size_t position(const std::vector<std::string> &names, llvm::StringRef name) {
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name)
      return i;
  ADD_FAILURE() << "no node " << name.str();
  return names.size();
}

using Names = std::vector<std::string>;

/// A graph of `body` over: an activation x, a matrix a, a 4 MiB gradient
/// on the host, two 4 MiB optimizer states s and t on NVMe, and a small
/// weight w on NVMe.
std::string graphOf(llvm::StringRef body) {
  return (R"(graph "g" {
  input %x : f32[16]
  input %a : f32[4096,4096]
  input %grad : f32[1048576] in cpu
  param %s : f32[1048576] in nvme init "s"
  param %t : f32[1048576] in nvme init "t"
  param %w : f32[16] in nvme init "w"
)" + body +
          "}\n")
      .str();
}

/// State `v` read from NVMe as %<v>cpu ("read-v"), updated on the host
/// ("update-v") and written back ("writeback-v").
std::string updated(const std::string &v) {
  return "  %" + v + "cpu : f32[1048576] in cpu = zinc.Copy(%" + v +
         ") name \"read-" + v + "\" on nvme\n  zinc.SGD(%" + v +
         "cpu, %grad) name \"update-" + v + "\" on host\n  zinc.CopyInto(%" +
         v + "cpu, %" + v + ") name \"writeback-" + v + "\" on nvme\n";
}

} // namespace

TEST(NvmeQueueOrderTest, AFetchPassesAWriteBack) {
  // The state is read for its host update and written back, then a weight
  // is fetched for compute: the fetch goes first, the state's copies keep
  // their order and stay ahead of the update that reads them.
  Reordered r = reorder(graphOf(updated("s") + R"(
  %wcpu : f32[16] in cpu = zinc.Copy(%w) name "fetch-w" on nvme
  %wgpu : f32[16] = zinc.Copy(%wcpu) name "w-to-gpu" on h2d
  %y : f32[16] = Add(%x, %wgpu) name "use-w"
  output %y
)"));
  EXPECT_EQ(r.nvme, (Names{"read-s", "fetch-w", "writeback-s"}));
  EXPECT_EQ(r.moved, 1u);
  EXPECT_LT(position(r.all, "update-s"), position(r.all, "writeback-s"));
}

TEST(NvmeQueueOrderTest, AFetchPassesAStateReadButNotItsUpdate) {
  // The state read comes after the fetch is due, the update after both.
  Reordered r = reorder(graphOf(R"(
  %scpu : f32[1048576] in cpu = zinc.Copy(%s) name "read-s" on nvme
  %wcpu : f32[16] in cpu = zinc.Copy(%w) name "fetch-w" on nvme
  %wgpu : f32[16] = zinc.Copy(%wcpu) name "w-to-gpu" on h2d
  zinc.SGD(%scpu, %grad) name "update-s" on host
  %y : f32[16] = Add(%x, %wgpu) name "use-w"
  output %y
)"));
  EXPECT_EQ(r.nvme, (Names{"fetch-w", "read-s"}));
  EXPECT_LT(position(r.all, "read-s"), position(r.all, "update-s"));
}

TEST(NvmeQueueOrderTest, AFetchOfTheHomeBeingWrittenWaitsForIt) {
  // The fetch reads the very state the write-back stores: it stays behind.
  Reordered r = reorder(graphOf(updated("s") + R"(
  %again : f32[1048576] in cpu = zinc.Copy(%s) name "fetch-s" on nvme
  %sgpu : f32[1048576] = zinc.Copy(%again) name "s-to-gpu" on h2d
  %y : f32[1048576] = Relu(%sgpu) name "use-s"
  output %y
)"));
  EXPECT_EQ(r.nvme, (Names{"read-s", "writeback-s", "fetch-s"}));
  EXPECT_EQ(r.moved, 0u);
}

TEST(NvmeQueueOrderTest, AHeldCopyGoesOnceItsTimeIsUp) {
  // A 4096^3 product (137 GFLOP, ~9 ms on a V100) lies between the 4 MiB
  // write-back (~0.6 ms of the link) and the fetch: the write-back has
  // waited long enough and is not passed.
  Reordered r = reorder(graphOf(updated("s") + R"(
  %p : f32[4096,4096] = MatMul(%a, %a) name "product"
  %wcpu : f32[16] in cpu = zinc.Copy(%w) name "fetch-w" on nvme
  %wgpu : f32[16] = zinc.Copy(%wcpu) name "w-to-gpu" on h2d
  %y : f32[16] = Add(%x, %wgpu) name "use-w"
  output %y
  output %p
)"));
  EXPECT_EQ(r.nvme, (Names{"read-s", "writeback-s", "fetch-w"}));
  EXPECT_EQ(r.moved, 0u);
}

TEST(NvmeQueueOrderTest, AReadForTheHostIsNoFetch) {
  // Two states read for host updates and written back: nothing to pass.
  Reordered r = reorder(graphOf(updated("s") + updated("t")));
  EXPECT_EQ(r.nvme, (Names{"read-s", "writeback-s", "read-t", "writeback-t"}));
  EXPECT_EQ(r.moved, 0u);
}
