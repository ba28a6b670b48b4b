//===- NcclCommunicator.h - Collectives between GPUs over NCCL ------------===//
//
// The cuda backend's communicator: one NCCL communicator per process, one
// GPU per rank, bootstrapped over the ranks' MPI communicator (rank 0 makes
// NCCL's unique id and broadcasts it). Tensors are device memory; each
// collective runs on the given stream and is waited for by polling, so a
// peer that died ends in a diagnostic after the timeout (and ncclCommAbort),
// not a hang.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_CUDA_NCCLCOMMUNICATOR_H
#define ZINC_RUNTIME_CUDA_NCCLCOMMUNICATOR_H

#include "zinc/runtime/comm/Communicator.h"
#include <cuda_runtime_api.h>
#include <memory>

namespace zinc::cuda {

/// A communicator over the ranks of `bootstrap` (its rank and size), on
/// CUDA device `device` (-1: the current one; the cuda runtime gives the
/// rank's own, DevicePlacement.h), running collectives on `stream`; its
/// tensors, broadcast's included, are device memory. Fails with a
/// diagnostic when this process has no CUDA device.
llvm::Expected<std::unique_ptr<comm::Communicator>>
createNcclCommunicator(comm::Communicator &bootstrap, cudaStream_t stream,
                       double timeoutSeconds, int device = -1);

} // namespace zinc::cuda

#endif
