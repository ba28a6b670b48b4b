//===- DevicePlacementTest.cpp - Rank to device, and --comm's refusals ----===//
#include "zinc/runtime/comm/DevicePlacement.h"
#include "gtest/gtest.h"
#include <map>
#include <string>

using namespace zinc::comm;

namespace {

std::string errorText(llvm::Error err) {
  return llvm::toString(std::move(err));
}

DeviceChoice choose(NodeRanks node, int devices, CommKind requested,
                    bool nccl = true) {
  auto choice = chooseDevice(node, devices, requested, nccl);
  EXPECT_TRUE(static_cast<bool>(choice))
      << (choice ? "" : errorText(choice.takeError()));
  return choice ? *choice : DeviceChoice{-1, CommKind::Auto};
}

std::optional<unsigned>
localRankFrom(const std::map<std::string, std::string> &env) {
  auto rank = localRankFromEnvironment([&](const char *name) -> const char * {
    auto found = env.find(name);
    return found == env.end() ? nullptr : found->second.c_str();
  });
  EXPECT_TRUE(static_cast<bool>(rank));
  return rank ? *rank : std::nullopt;
}

// Each rank has its own GPU: NCCL on the GPU of its local rank.
TEST(DevicePlacement, AutoPicksNcclWithAGpuPerRank) {
  for (unsigned r = 0; r < 4; ++r) {
    DeviceChoice c = choose({r, 4}, 8, CommKind::Auto);
    EXPECT_EQ(c.comm, CommKind::Nccl);
    EXPECT_EQ(c.device, static_cast<int>(r));
  }
}

// Two ranks on one GPU (the lent machines): staged MPI, both on device 0.
TEST(DevicePlacement, AutoStagesThroughMpiWhenRanksShareAGpu) {
  for (unsigned r = 0; r < 2; ++r) {
    DeviceChoice c = choose({r, 2}, 1, CommKind::Auto);
    EXPECT_EQ(c.comm, CommKind::Mpi);
    EXPECT_EQ(c.device, 0);
  }
  // Five ranks on two GPUs share them round robin.
  EXPECT_EQ(choose({3, 5}, 2, CommKind::Auto).device, 1);
  EXPECT_EQ(choose({4, 5}, 2, CommKind::Auto).device, 0);
}

// Without NCCL in the build, auto is MPI even with a GPU per rank.
TEST(DevicePlacement, AutoWithoutNcclIsMpi) {
  DeviceChoice c = choose({1, 2}, 2, CommKind::Auto, /*nccl=*/false);
  EXPECT_EQ(c.comm, CommKind::Mpi);
  EXPECT_EQ(c.device, 1);
}

// --comm=mpi with a GPU per rank still gives each rank its own.
TEST(DevicePlacement, MpiKeepsOneGpuPerRankWhereThereAreEnough) {
  DeviceChoice c = choose({2, 4}, 4, CommKind::Mpi);
  EXPECT_EQ(c.comm, CommKind::Mpi);
  EXPECT_EQ(c.device, 2);
}

// The refusals, one line each, saying what to use instead.
TEST(DevicePlacement, Refusals) {
  EXPECT_EQ(
      errorText(chooseDevice({1, 2}, 1, CommKind::Nccl, true).takeError()),
      "--comm=nccl needs a GPU per rank, and the 2 ranks on this node share 1 "
      "GPU; "
      "use --comm=mpi (or --comm=auto)");
  EXPECT_EQ(
      errorText(chooseDevice({0, 3}, 2, CommKind::Nccl, true).takeError()),
      "--comm=nccl needs a GPU per rank, and the 3 ranks on this node share 2 "
      "GPUs; "
      "use --comm=mpi (or --comm=auto)");
  EXPECT_EQ(
      errorText(chooseDevice({0, 1}, 1, CommKind::Nccl, false).takeError()),
      "--comm=nccl: this zinc-run was built without NCCL; use --comm=mpi");
  EXPECT_EQ(errorText(chooseDevice({0, 2}, 0, CommKind::Mpi, true).takeError()),
            "--backend=cuda needs a CUDA device, and this machine has none "
            "(use --backend=cpu)");
  EXPECT_EQ(
      errorText(chooseDevice({2, 2}, 4, CommKind::Auto, true).takeError()),
      "local rank 2 is not one of the 2 ranks on this node");
}

TEST(DevicePlacement, ParseComm) {
  EXPECT_EQ(*parseCommKind("auto"), CommKind::Auto);
  EXPECT_EQ(*parseCommKind("nccl"), CommKind::Nccl);
  EXPECT_EQ(*parseCommKind("mpi"), CommKind::Mpi);
  EXPECT_EQ(errorText(parseCommKind("gloo").takeError()),
            "--comm: unknown value 'gloo' (expected auto, nccl or mpi)");
  for (CommKind k : {CommKind::Auto, CommKind::Nccl, CommKind::Mpi})
    EXPECT_EQ(*parseCommKind(commKindName(k)), k);
}

// Auto settles on MPI everywhere when one rank needs it; explicit stands.
TEST(DevicePlacement, RanksAgree) {
  EXPECT_EQ(agreeOnComm(CommKind::Auto, CommKind::Nccl, true), CommKind::Mpi);
  EXPECT_EQ(agreeOnComm(CommKind::Auto, CommKind::Nccl, false), CommKind::Nccl);
  EXPECT_EQ(agreeOnComm(CommKind::Mpi, CommKind::Mpi, true), CommKind::Mpi);
}

// The launchers' variables, Open MPI's first; none set is no local rank.
TEST(DevicePlacement, LocalRankFromTheLauncher) {
  EXPECT_EQ(localRankFrom(
                {{"OMPI_COMM_WORLD_LOCAL_RANK", "3"}, {"SLURM_LOCALID", "1"}}),
            3u);
  EXPECT_EQ(localRankFrom({{"SLURM_LOCALID", "1"}}), 1u);
  EXPECT_EQ(localRankFrom({{"MPI_LOCALRANKID", "2"}}), 2u);
  EXPECT_EQ(localRankFrom({{"PMIX_LOCAL_RANK", "0"}}), 0u);
  EXPECT_EQ(localRankFrom({{"OMPI_COMM_WORLD_RANK", "5"}}), std::nullopt);
  auto bad = localRankFromEnvironment([](const char *name) -> const char * {
    return llvm::StringRef(name) == "SLURM_LOCALID" ? "x1" : nullptr;
  });
  ASSERT_FALSE(static_cast<bool>(bad));
  EXPECT_EQ(errorText(bad.takeError()),
            "SLURM_LOCALID='x1' is not a local rank (a number from 0)");
}

} // namespace
