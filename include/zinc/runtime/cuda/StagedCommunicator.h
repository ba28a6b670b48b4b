//===- StagedCommunicator.h - Device collectives over MPI via the host ---===//
//
// The cuda backend's communicator where NCCL cannot serve (ranks sharing a
// GPU, no NCCL-capable link, zinc-run --comm=mpi): comm/StagedCommunicator.h
// with pinned host slots and copies queued on the collective stream, in
// order after the work it waits for; a slot's copies to the host are waited
// for by a CUDA event before the slot is exchanged. Everything is allocated
// when it is made.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_CUDA_STAGEDCOMMUNICATOR_H
#define ZINC_RUNTIME_CUDA_STAGEDCOMMUNICATOR_H

#include "zinc/runtime/comm/StagedCommunicator.h"
#include <cuda_runtime_api.h>
#include <memory>

namespace zinc::cuda {

using StagingOptions = comm::StagingOptions;

/// Collectives over device memory among the ranks of `host` (MPI, whose
/// rank and size it takes), their copies on `stream`. `host` must outlive it.
llvm::Expected<std::unique_ptr<comm::Communicator>>
createStagedCommunicator(comm::Communicator &host, cudaStream_t stream,
                         const StagingOptions &opts = {});

} // namespace zinc::cuda

#endif
