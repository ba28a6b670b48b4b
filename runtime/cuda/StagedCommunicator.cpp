//===- StagedCommunicator.cpp - Device collectives over MPI via the host -===//
//
// comm/StagedCommunicator.cpp does the staging; this is how its bytes move
// on a CUDA device: pinned slots (cudaHostAlloc), copies queued on the
// collective stream, a CUDA event per slot recorded after a chunk's copies
// to the host and waited for before the host exchanges the slot.
//
//===----------------------------------------------------------------------===//
#include "zinc/runtime/cuda/StagedCommunicator.h"
#include "zinc/runtime/cuda/CudaCheck.h"
#include "zinc/runtime/cuda/Device.h"
#include "zinc/support/Error.h"
#include <vector>

namespace zinc::cuda {
namespace {

class CudaStagingCopier : public comm::StagingCopier {
public:
  explicit CudaStagingCopier(cudaStream_t stream) : stream(stream) {}

  llvm::Error init(const StagingOptions &opts) {
    auto pinned = PinnedBuffer::create(opts.slotBytes * opts.slots);
    if (!pinned)
      return addContext(pinned.takeError(),
                        "the staging of collectives through the host");
    staging = std::move(*pinned);
    for (unsigned s = 0; s < opts.slots; ++s) {
      auto ev = Event::create();
      if (!ev)
        return ev.takeError();
      copied.push_back(std::move(*ev));
    }
    return llvm::Error::success();
  }

  uint8_t *slotMemory() override {
    return static_cast<uint8_t *>(staging.data());
  }
  llvm::Error toHost(void *host, const void *device, uint64_t n,
                     llvm::StringRef what) override {
    return copy(host, device, n, cudaMemcpyDeviceToHost, what);
  }
  llvm::Error toDevice(void *device, const void *host, uint64_t n,
                       llvm::StringRef what) override {
    return copy(device, host, n, cudaMemcpyHostToDevice, what);
  }
  llvm::Error zeroDevice(void *device, uint64_t n,
                         llvm::StringRef what) override {
    return checkCuda(cudaMemsetAsync(device, 0, n, stream),
                     what + ": zeroing the shard's padding");
  }
  llvm::Error markToHost(unsigned slot) override {
    return checkCuda(cudaEventRecord(copied[slot].get(), stream),
                     "cudaEventRecord(a staging slot's copies)");
  }
  llvm::Error waitToHost(unsigned slot, llvm::StringRef what) override {
    if (auto err = copied[slot].synchronize())
      return addContext(std::move(err), what + ": staging to the host");
    return llvm::Error::success();
  }

private:
  llvm::Error copy(void *dst, const void *src, uint64_t n, cudaMemcpyKind kind,
                   llvm::StringRef what) {
    return checkCuda(cudaMemcpyAsync(dst, src, n, kind, stream),
                     what + ": staging " + llvm::Twine(n) + " bytes " +
                         (kind == cudaMemcpyDeviceToHost ? "to" : "from") +
                         " the host");
  }

  cudaStream_t stream;
  PinnedBuffer staging;
  std::vector<Event> copied;
};

} // namespace

llvm::Expected<std::unique_ptr<comm::Communicator>>
createStagedCommunicator(comm::Communicator &host, cudaStream_t stream,
                         const StagingOptions &opts) {
  if (opts.slots == 0 || opts.slotBytes == 0)
    return makeError(
        "staging collectives needs at least one slot of some bytes");
  auto copier = std::make_unique<CudaStagingCopier>(stream);
  if (auto err = copier->init(opts))
    return err;
  return comm::createStagedCommunicator(
      host, std::move(copier), opts, "MPI staged through pinned host memory");
}

} // namespace zinc::cuda
