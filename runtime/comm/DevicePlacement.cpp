//===- DevicePlacement.cpp - Which GPU a rank uses, and over which link ---===//
#include "zinc/runtime/comm/DevicePlacement.h"
#include "zinc/support/Error.h"
#include "llvm/ADT/StringExtras.h"

namespace zinc::comm {

llvm::Expected<CommKind> parseCommKind(llvm::StringRef name) {
  if (name == "auto")
    return CommKind::Auto;
  if (name == "nccl")
    return CommKind::Nccl;
  if (name == "mpi")
    return CommKind::Mpi;
  return makeError("--comm: unknown value '" + name +
                   "' (expected auto, nccl or mpi)");
}

llvm::StringRef commKindName(CommKind kind) {
  switch (kind) {
  case CommKind::Auto:
    return "auto";
  case CommKind::Nccl:
    return "nccl";
  case CommKind::Mpi:
    return "mpi";
  }
  return "auto";
}

llvm::Expected<std::optional<unsigned>> localRankFromEnvironment(
    llvm::function_ref<const char *(const char *)> lookup) {
  for (const char *var : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID",
                          "MPI_LOCALRANKID", "PMIX_LOCAL_RANK"}) {
    const char *value = lookup(var);
    if (!value)
      continue;
    unsigned rank = 0;
    if (llvm::StringRef(value).trim().getAsInteger(10, rank))
      return makeError(llvm::Twine(var) + "='" + value +
                       "' is not a local rank (a number from 0)");
    return std::optional<unsigned>(rank);
  }
  return std::optional<unsigned>();
}

static std::string gpus(int n) {
  return std::to_string(n) + (n == 1 ? " GPU" : " GPUs");
}

llvm::Expected<DeviceChoice> chooseDevice(NodeRanks node, int deviceCount,
                                          CommKind requested, bool ncclBuilt) {
  if (deviceCount <= 0)
    return makeError(
        "--backend=cuda needs a CUDA device, and this machine has none "
        "(use --backend=cpu)");
  if (node.localRanks == 0 || node.localRank >= node.localRanks)
    return makeError("local rank " + llvm::Twine(node.localRank) +
                     " is not one of the " + llvm::Twine(node.localRanks) +
                     " ranks on this node");
  bool ownGpu = node.localRanks <= static_cast<unsigned>(deviceCount);
  if (requested == CommKind::Nccl) {
    if (!ncclBuilt)
      return makeError(
          "--comm=nccl: this zinc-run was built without NCCL; use --comm=mpi");
    if (!ownGpu)
      return makeError("--comm=nccl needs a GPU per rank, and the " +
                       llvm::Twine(node.localRanks) +
                       " ranks on this node share " + gpus(deviceCount) +
                       "; use --comm=mpi (or --comm=auto)");
  }
  DeviceChoice choice;
  if (requested == CommKind::Nccl ||
      (requested == CommKind::Auto && ownGpu && ncclBuilt)) {
    choice.comm = CommKind::Nccl;
    choice.device = static_cast<int>(node.localRank);
    return choice;
  }
  choice.comm = CommKind::Mpi;
  choice.device =
      static_cast<int>(node.localRank % static_cast<unsigned>(deviceCount));
  return choice;
}

CommKind agreeOnComm(CommKind requested, CommKind mine, bool anyMpi) {
  if (requested == CommKind::Auto && anyMpi)
    return CommKind::Mpi;
  return mine;
}

} // namespace zinc::comm
