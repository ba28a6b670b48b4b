//===- Communicator.cpp - Reduce ops, launch detection, the one-rank case -===//
#include "zinc/runtime/comm/Communicator.h"
#include "zinc/support/Error.h"
#include <cstdlib>
#include <cstring>

namespace zinc::comm {

bool launchedAsMpiRank() {
  // Open MPI's mpirun, and PMI/PMIx launchers (Slurm's srun, MPICH's hydra).
  for (const char *var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"})
    if (std::getenv(var))
      return true;
  return false;
}

namespace {

/// The collectives of a world of one: a reduction over one rank is the
/// rank's own tensor, and its shard is the whole tensor.
class SelfCommunicator : public Communicator {
public:
  unsigned rank() const override { return 0; }
  unsigned size() const override { return 1; }
  llvm::StringRef kind() const override { return "one rank"; }

  llvm::Error allReduce(void *, int64_t count, DType dtype, ReduceOp, llvm::StringRef,
                        llvm::MutableArrayRef<float>) override {
    bytes().allreduce += count * dtypeSize(dtype);
    return llvm::Error::success();
  }
  llvm::Error allGather(const void *shard, void *whole, int64_t count, int64_t,
                        DType dtype, llvm::StringRef) override {
    std::memmove(whole, shard, count * dtypeSize(dtype));
    bytes().allgather += count * dtypeSize(dtype);
    return llvm::Error::success();
  }
  llvm::Error gather(const void *shard, void *whole, int64_t count, int64_t, DType dtype,
                     unsigned, llvm::StringRef) override {
    std::memmove(whole, shard, count * dtypeSize(dtype));
    return llvm::Error::success();
  }
  llvm::Error broadcast(void *, size_t, unsigned, llvm::StringRef) override {
    return llvm::Error::success();
  }
  llvm::Error reduceScatter(const void *whole, void *shard, int64_t count,
                            int64_t shardCount, DType dtype, ReduceOp,
                            llvm::StringRef, llvm::MutableArrayRef<float>) override {
    size_t e = dtypeSize(dtype);
    std::memmove(shard, whole, count * e);
    std::memset(static_cast<uint8_t *>(shard) + count * e, 0, (shardCount - count) * e);
    bytes().reduceScatter += count * e;
    return llvm::Error::success();
  }
};

} // namespace

std::unique_ptr<Communicator> createSelfCommunicator() {
  return std::make_unique<SelfCommunicator>();
}

} // namespace zinc::comm
