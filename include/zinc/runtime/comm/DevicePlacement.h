//===- DevicePlacement.h - Which GPU a rank uses, and over which link -----===//
//
// Plain host code (no CUDA), so that CI without a GPU tests it: the cuda
// backend's choice, per rank, of its CUDA device and of how its collectives
// travel (zinc-run --comm=auto|nccl|mpi). NCCL needs a GPU of its own per
// rank; MPI staged through pinned host memory lets ranks share one.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_COMM_DEVICEPLACEMENT_H
#define ZINC_RUNTIME_COMM_DEVICEPLACEMENT_H

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include <optional>

namespace zinc::comm {

/// How the cuda backend's ranks exchange tensors.
enum class CommKind { Auto, Nccl, Mpi };

/// "auto", "nccl" or "mpi"; anything else is zinc-run's one-line refusal.
llvm::Expected<CommKind> parseCommKind(llvm::StringRef name);
llvm::StringRef commKindName(CommKind kind);

/// This process's place among the ranks on its node.
struct NodeRanks {
  unsigned localRank = 0;
  unsigned localRanks = 1;
};

/// The launcher's local rank: Open MPI's OMPI_COMM_WORLD_LOCAL_RANK, Slurm's
/// SLURM_LOCALID, MPICH's MPI_LOCALRANKID or PMIx's PMIX_LOCAL_RANK, the first
/// set; none when none is, or an error naming a variable that is not a
/// number. `lookup` is getenv (tests pass their own).
llvm::Expected<std::optional<unsigned>>
localRankFromEnvironment(llvm::function_ref<const char *(const char *)> lookup);

/// This rank's place on its node, under MPI (MpiCommunicator.cpp): the
/// ranks sharing its memory (MPI_Comm_split_type, shared memory) count the
/// node's ranks; its local rank is the launcher's (localRankFromEnvironment)
/// where it says, else its place in that split. MPI must be running
/// (createMpiCommunicator).
llvm::Expected<NodeRanks> mpiNodeRanks();

/// A rank's CUDA device and the communicator it uses (Nccl or Mpi, never Auto).
struct DeviceChoice {
  int device = 0;
  CommKind comm = CommKind::Mpi;
};

/// The device and communicator of rank `node.localRank` of the
/// `node.localRanks` ranks on a node with `deviceCount` CUDA devices, asked
/// for `requested`. NCCL: device = local rank, refused (one line, saying
/// why and what to use) when the node's ranks outnumber its devices or this
/// build has no NCCL. MPI: device = local rank modulo the devices, so ranks
/// may share one. Auto: NCCL when every rank of the node has a device of its
/// own and NCCL is built, else MPI. Ranks must agree on the communicator:
/// `agreeOnComm` settles a world whose nodes chose differently.
llvm::Expected<DeviceChoice> chooseDevice(NodeRanks node, int deviceCount,
                                          CommKind requested, bool ncclBuilt);

/// The communicator every rank uses when rank choices `anyMpi` (some rank
/// chose MPI) were made under `requested`: auto falls back to MPI on every
/// rank if one rank needs it; an explicit choice stands.
CommKind agreeOnComm(CommKind requested, CommKind mine, bool anyMpi);

} // namespace zinc::comm

#endif
