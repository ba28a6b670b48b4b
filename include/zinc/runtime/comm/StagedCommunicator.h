//===- StagedCommunicator.h - Device collectives through host staging ----===//
//
// Collectives over device memory for ranks that cannot reach each other's
// devices directly (ranks sharing a GPU, no NCCL-capable link): each goes
// device -> host staging slot -> the ranks' host communicator (MPI) ->
// device, in chunks that cycle through the slots so that one chunk's copies
// overlap another's exchange (StagingPlan.h). Plain host code: how bytes
// move between device and slots is a StagingCopier, CUDA's in
// runtime/cuda/StagedCommunicator.cpp, plain memcpy in the unit tests.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_COMM_STAGEDCOMMUNICATOR_H
#define ZINC_RUNTIME_COMM_STAGEDCOMMUNICATOR_H

#include "zinc/runtime/comm/Communicator.h"
#include <cstdint>
#include <memory>

namespace zinc::comm {

/// Staging through `slots` host slots of `slotBytes` each.
struct StagingOptions {
  uint64_t slotBytes = uint64_t(8) << 20;
  unsigned slots = 2;
};

/// Moves bytes between device memory and the staging slots. Copies may be
/// queued (asynchronous, completing in the order queued); the staged
/// communicator waits for a slot's copies to the host before it exchanges
/// the slot, and returns with its last copies to the device still queued.
class StagingCopier {
public:
  virtual ~StagingCopier();
  /// The slots' host memory: slots * slotBytes bytes.
  virtual uint8_t *slotMemory() = 0;
  virtual llvm::Error toHost(void *host, const void *device, uint64_t bytes,
                             llvm::StringRef what) = 0;
  virtual llvm::Error toDevice(void *device, const void *host, uint64_t bytes,
                               llvm::StringRef what) = 0;
  virtual llvm::Error zeroDevice(void *device, uint64_t bytes,
                                 llvm::StringRef what) = 0;
  /// Called once a chunk's copies into `slot` are queued; waitToHost(slot)
  /// then blocks until they are done.
  virtual llvm::Error markToHost(unsigned slot) = 0;
  virtual llvm::Error waitToHost(unsigned slot, llvm::StringRef what) = 0;
};

/// Collectives over device memory among the ranks of `host` (whose rank and
/// size it takes; it must outlive the result), staged by `copier`. `kind`
/// names it in diagnostics.
llvm::Expected<std::unique_ptr<Communicator>>
createStagedCommunicator(Communicator &host,
                         std::unique_ptr<StagingCopier> copier,
                         const StagingOptions &opts, llvm::StringRef kind);

} // namespace zinc::comm

#endif
