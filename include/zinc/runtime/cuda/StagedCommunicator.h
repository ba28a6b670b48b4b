//===- StagedCommunicator.h - Device collectives over MPI, through the host
//===//
//
// The cuda backend's communicator where NCCL cannot serve (ranks sharing a
// GPU, no NCCL-capable link, zinc-run --comm=mpi): each collective on device
// memory goes device -> pinned host -> MPI (the ranks' host communicator) ->
// device, in chunks that cycle through pinned staging slots so that one
// chunk's copies overlap another's exchange (comm/StagingPlan.h). Copies are
// queued on the collective stream, in order after the work it waits for;
// the host waits for a chunk's copy to the host before exchanging it, and a
// collective returns with its last copies to the device still queued (the
// stream orders what follows). Everything is allocated when it is made.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_CUDA_STAGEDCOMMUNICATOR_H
#define ZINC_RUNTIME_CUDA_STAGEDCOMMUNICATOR_H

#include "zinc/runtime/comm/Communicator.h"
#include <cuda_runtime_api.h>
#include <memory>

namespace zinc::cuda {

/// Staging through `slots` pinned slots of `slotBytes` each.
struct StagingOptions {
  uint64_t slotBytes = uint64_t(8) << 20;
  unsigned slots = 2;
};

/// Collectives over device memory among the ranks of `host` (MPI, whose
/// rank and size it takes), their copies on `stream`. `host` must outlive it.
llvm::Expected<std::unique_ptr<comm::Communicator>>
createStagedCommunicator(comm::Communicator &host, cudaStream_t stream,
                         const StagingOptions &opts = {});

} // namespace zinc::cuda

#endif
