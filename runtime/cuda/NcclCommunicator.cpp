//===- NcclCommunicator.cpp - Collectives between GPUs over NCCL ----------===//
//
// NCCL's collectives take equal counts per rank; zinc's shards leave the
// last rank short of the padded share (Sharding.h), so the gather is a
// group of broadcasts (each rank's owned elements into their place in the
// whole tensor) and the reduce-scatter a group of reduces (each rank's
// share reduced to it). Means are ncclAvg, which NCCL takes as a
// pre-multiplied sum, so 16-bit gradients do not overflow where their mean
// would not. A bucket of collectives (Communicator::beginGroup) is one
// outer NCCL group: one launch, one wait.
//
//===----------------------------------------------------------------------===//
#include "zinc/runtime/cuda/NcclCommunicator.h"
#include "zinc/runtime/cuda/CudaCheck.h"
#include "zinc/runtime/cuda/Device.h"
#include "zinc/support/Error.h"
#include "llvm/Support/FormatVariadic.h"
#include <chrono>
#include <nccl.h>
#include <thread>

namespace zinc::cuda {
namespace {

llvm::Error checkNccl(ncclResult_t status, const llvm::Twine &call) {
  if (status == ncclSuccess || status == ncclInProgress)
    return llvm::Error::success();
  return makeError(call + ": " + ncclGetErrorString(status));
}

llvm::Expected<ncclDataType_t> ncclType(DType dtype, llvm::StringRef what) {
  switch (dtype) {
  case DType::F32: return ncclFloat32;
  case DType::F64: return ncclFloat64;
  case DType::F16: return ncclFloat16;
  case DType::BF16: return ncclBfloat16;
  case DType::I64: return ncclInt64;
  case DType::I32: return ncclInt32;
  case DType::U8: return ncclUint8;
  default:
    return makeError(what + ": NCCL has no " + dtypeName(dtype) + " type");
  }
}

ncclRedOp_t ncclOp(comm::ReduceOp op) {
  switch (op) {
  case comm::ReduceOp::Sum: return ncclSum;
  case comm::ReduceOp::Mean: return ncclAvg;
  case comm::ReduceOp::Max: return ncclMax;
  }
  return ncclSum;
}

class NcclCommunicator : public comm::Communicator {
public:
  NcclCommunicator(unsigned rank, unsigned size, cudaStream_t stream, double timeout)
      : myRank(rank), worldSize(size), stream(stream), timeout(timeout) {}
  ~NcclCommunicator() override {
    if (nccl)
      ncclCommDestroy(nccl);
  }

  llvm::Error init(comm::Communicator &bootstrap) {
    ncclUniqueId id;
    if (myRank == 0)
      if (auto err = checkNccl(ncclGetUniqueId(&id), "ncclGetUniqueId"))
        return err;
    if (auto err = bootstrap.broadcast(&id, sizeof id, 0, "the NCCL id's broadcast"))
      return err;
    return checkNccl(ncclCommInitRank(&nccl, static_cast<int>(worldSize), id,
                                      static_cast<int>(myRank)),
                     "ncclCommInitRank(" + llvm::Twine(worldSize) + " ranks)");
  }

  unsigned rank() const override { return myRank; }
  unsigned size() const override { return worldSize; }
  llvm::StringRef kind() const override { return "NCCL"; }

  llvm::Error allReduce(void *data, int64_t count, DType dtype, comm::ReduceOp op,
                        llvm::StringRef what, llvm::MutableArrayRef<float>) override {
    auto type = ncclType(dtype, what);
    if (!type)
      return type.takeError();
    if (auto err = checkNccl(ncclAllReduce(data, data, count, *type, ncclOp(op), nccl, stream),
                             what))
      return err;
    if (auto err = waitUnlessGrouped(what))
      return err;
    bytes().allreduce += count * dtypeSize(dtype);
    return llvm::Error::success();
  }

  llvm::Error allGather(const void *shard, void *whole, int64_t count, int64_t shardCount,
                        DType dtype, llvm::StringRef what) override {
    auto type = ncclType(dtype, what);
    if (!type)
      return type.takeError();
    size_t e = dtypeSize(dtype);
    // Rank r broadcasts the elements it owns into their place in `whole`.
    if (auto err = groupOverOwners(count, shardCount, what,
                                   [&](unsigned r, int64_t owned) {
                                     void *dst = static_cast<uint8_t *>(whole) + shardCount * r * e;
                                     return ncclBroadcast(r == myRank ? shard : dst, dst, owned,
                                                          *type, static_cast<int>(r), nccl, stream);
                                   }))
      return err;
    if (auto err = waitUnlessGrouped(what))
      return err;
    bytes().allgather += count * e;
    return llvm::Error::success();
  }

  llvm::Error reduceScatter(const void *whole, void *shard, int64_t count,
                            int64_t shardCount, DType dtype, comm::ReduceOp op,
                            llvm::StringRef what, llvm::MutableArrayRef<float>) override {
    auto type = ncclType(dtype, what);
    if (!type)
      return type.takeError();
    size_t e = dtypeSize(dtype);
    // Every rank's share of `whole` is reduced to the rank that owns it.
    if (auto err = groupOverOwners(count, shardCount, what,
                                   [&](unsigned r, int64_t owned) {
                                     const void *src =
                                         static_cast<const uint8_t *>(whole) + shardCount * r * e;
                                     return ncclReduce(src, shard, owned, *type, ncclOp(op),
                                                       static_cast<int>(r), nccl, stream);
                                   }))
      return err;
    int64_t mine = ownedElements(count, shardCount, myRank);
    if (auto err = checkCuda(cudaMemsetAsync(static_cast<uint8_t *>(shard) + mine * e, 0,
                                             (shardCount - mine) * e, stream),
                             what + ": zeroing the shard's padding"))
      return err;
    if (auto err = waitUnlessGrouped(what))
      return err;
    bytes().reduceScatter += count * e;
    return llvm::Error::success();
  }

  llvm::Error gather(const void *shard, void *whole, int64_t count, int64_t shardCount,
                     DType dtype, unsigned root, llvm::StringRef what) override {
    auto type = ncclType(dtype, what);
    if (!type)
      return type.takeError();
    size_t e = dtypeSize(dtype);
    // Every owner sends its elements to the root, which receives each into
    // its place in `whole` (its own by a device copy).
    if (auto err = groupOverOwners(count, shardCount, what,
                                   [&](unsigned r, int64_t owned) -> ncclResult_t {
                                     void *dst = static_cast<uint8_t *>(whole) + shardCount * r * e;
                                     if (myRank == root && r == root)
                                       return cudaMemcpyAsync(dst, shard, owned * e,
                                                              cudaMemcpyDeviceToDevice, stream) ==
                                                      cudaSuccess
                                                  ? ncclSuccess
                                                  : ncclUnhandledCudaError;
                                     if (myRank == root)
                                       return ncclRecv(dst, owned, *type, static_cast<int>(r),
                                                       nccl, stream);
                                     if (r == myRank)
                                       return ncclSend(shard, owned, *type,
                                                       static_cast<int>(root), nccl, stream);
                                     return ncclSuccess;
                                   }))
      return err;
    return wait(what);
  }

  llvm::Error broadcast(void *data, size_t bytes, unsigned root,
                        llvm::StringRef what) override {
    if (auto err = checkNccl(ncclBroadcast(data, data, bytes, ncclUint8,
                                           static_cast<int>(root), nccl, stream),
                             what))
      return err;
    return wait(what);
  }

  void beginGroup() override {
    ncclGroupStart();
    grouped = true;
    groupWhat.clear();
  }

  llvm::Error endGroup() override {
    grouped = false;
    if (auto err = checkNccl(ncclGroupEnd(), "a bucket of collectives"))
      return err;
    return wait(groupWhat.empty() ? "a bucket of collectives" : groupWhat);
  }

private:
  /// Out of a group, waits for the collective just issued; in one, the
  /// group's end waits for all of them (diagnostics name the first).
  llvm::Error waitUnlessGrouped(llvm::StringRef what) {
    if (!grouped)
      return wait(what);
    if (groupWhat.empty())
      groupWhat = ("the bucket of " + what).str();
    return llvm::Error::success();
  }

  /// One NCCL group of `call(r, owned)` for each rank r that owns elements
  /// of a tensor of `count` split in shards of `shardCount`.
  template <typename Call>
  llvm::Error groupOverOwners(int64_t count, int64_t shardCount, llvm::StringRef what,
                              Call call) {
    ncclGroupStart();
    for (unsigned r = 0; r < worldSize; ++r) {
      int64_t owned = ownedElements(count, shardCount, r);
      if (!owned)
        continue;
      if (auto err = checkNccl(call(r, owned), what)) {
        ncclGroupEnd();
        return err;
      }
    }
    return checkNccl(ncclGroupEnd(), what);
  }

  /// Polls the stream until the collective is done, NCCL reports an
  /// asynchronous error (a peer's death, a network failure), or the
  /// timeout passes; then the communicator is aborted, so no kernel of it
  /// waits forever on the device.
  llvm::Error wait(llvm::StringRef what) {
    using Clock = std::chrono::steady_clock;
    auto start = Clock::now();
    for (unsigned spins = 0;; ++spins) {
      cudaError_t state = cudaStreamQuery(stream);
      if (state == cudaSuccess)
        return llvm::Error::success();
      if (state != cudaErrorNotReady)
        return checkCuda(state, what);
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(nccl, &async);
      if (async != ncclSuccess && async != ncclInProgress) {
        ncclCommAbort(nccl);
        nccl = nullptr;
        return makeError(llvm::formatv("rank {0}: {1} failed: {2}", myRank, what,
                                       ncclGetErrorString(async))
                             .str());
      }
      double waited = std::chrono::duration<double>(Clock::now() - start).count();
      if (waited > timeout) {
        ncclCommAbort(nccl);
        nccl = nullptr;
        return makeError(llvm::formatv("rank {0}: {1} timed out after {2:f1} s waiting "
                                       "for the other ranks (did one of the {3} ranks "
                                       "die or stop?)",
                                       myRank, what, waited, worldSize)
                             .str());
      }
      if (spins > 1024)
        std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  unsigned myRank, worldSize;
  cudaStream_t stream;
  double timeout;
  ncclComm_t nccl = nullptr;
  bool grouped = false;
  std::string groupWhat;
};

} // namespace

llvm::Expected<std::unique_ptr<comm::Communicator>>
createNcclCommunicator(comm::Communicator &bootstrap, cudaStream_t stream,
                       double timeoutSeconds, int device) {
  auto devices = cudaDeviceCount();
  if (!devices)
    return devices.takeError();
  if (*devices == 0)
    return makeError("rank " + llvm::Twine(bootstrap.rank()) +
                     ": NCCL needs a CUDA device, and this process has none");
  if (device >= *devices)
    return makeError("rank " + llvm::Twine(bootstrap.rank()) + ": CUDA device " +
                     llvm::Twine(device) + " does not exist (this machine has " +
                     llvm::Twine(*devices) + ")");
  if (device >= 0)
    if (auto err = checkCuda(cudaSetDevice(device),
                             "cudaSetDevice(" + llvm::Twine(device) + ")"))
      return err;
  auto comm = std::make_unique<NcclCommunicator>(bootstrap.rank(), bootstrap.size(), stream,
                                                 timeoutSeconds);
  if (auto err = comm->init(bootstrap))
    return err;
  return std::unique_ptr<comm::Communicator>(std::move(comm));
}

} // namespace zinc::cuda
