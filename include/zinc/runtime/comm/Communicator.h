//===- Communicator.h - Collectives between data-parallel ranks -----------===//
//
// What the collective kernels (runtime/cpu/kernels/Collectives.cpp) call:
// MPI on the cpu backend (MpiCommunicator.cpp), NCCL on the cuda backend,
// or one rank talking to itself. Every rank calls the same collectives in
// the same order: the plan's collective stream runs them in plan order.
//
// Tensors are split into shards as the partition pass splits them
// (ir::Value::shardOf): `whole` elements padded to ranks * shard, rank r
// owning [r * shard, r * shard + shard); the padding is never sent.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_COMM_COMMUNICATOR_H
#define ZINC_RUNTIME_COMM_COMMUNICATOR_H

#include "zinc/support/DType.h"
#include "zinc/support/Sharding.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>

namespace zinc::comm {

enum class ReduceOp { Sum, Mean, Max };

/// "sum", "mean" or "max" (a collective's `op` attribute).
inline llvm::Expected<ReduceOp> parseReduceOp(llvm::StringRef name) {
  if (name == "sum")
    return ReduceOp::Sum;
  if (name == "mean")
    return ReduceOp::Mean;
  if (name == "max")
    return ReduceOp::Max;
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "unknown reduction '" + name +
                                     "' (expected sum, mean or max)");
}

/// Bytes this rank's collectives carried, by kind: the whole tensor each
/// gathered, reduce-scattered or all-reduced (what --metrics reports).
struct CollectiveBytes {
  std::atomic<uint64_t> allgather{0}, reduceScatter{0}, allreduce{0};
};

class Communicator {
public:
  virtual ~Communicator() = default;
  virtual unsigned rank() const = 0;
  virtual unsigned size() const = 0;
  /// Where this communicator's collectives come from, for diagnostics
  /// ("MPI", "one rank").
  virtual llvm::StringRef kind() const = 0;

  /// `data` (count elements) becomes the reduction over ranks. `what`
  /// names the collective in diagnostics. 16-bit sums and means are taken
  /// in f32 through `scratch` (kCollectiveChunkElements at most, the
  /// kernel's workspace), a chunk at a time.
  virtual llvm::Error allReduce(void *data, int64_t count, DType dtype, ReduceOp op,
                                llvm::StringRef what,
                                llvm::MutableArrayRef<float> scratch = {}) = 0;
  /// `whole` (count elements) gets every rank's shard; this rank's comes
  /// from `shard` (ownedElements of it are read).
  virtual llvm::Error allGather(const void *shard, void *whole, int64_t count,
                                int64_t shardCount, DType dtype, llvm::StringRef what) = 0;
  /// `shard` (shardCount elements) gets this rank's shard of the reduction
  /// of every rank's `whole` (count elements); its padding is zeroed.
  virtual llvm::Error reduceScatter(const void *whole, void *shard, int64_t count,
                                    int64_t shardCount, DType dtype, ReduceOp op,
                                    llvm::StringRef what,
                                    llvm::MutableArrayRef<float> scratch = {}) = 0;

  /// Root's `whole` (count elements) gets every rank's shard (ownedElements
  /// of each `shard` are read); other ranks' `whole` is not touched and may
  /// be null. Saving sharded state: only the writer holds a whole tensor.
  virtual llvm::Error gather(const void *shard, void *whole, int64_t count,
                             int64_t shardCount, DType dtype, unsigned root,
                             llvm::StringRef what) = 0;

  /// `bytes` at `data` become root's on every rank (bootstrapping other
  /// communicators: NCCL's unique id).
  virtual llvm::Error broadcast(void *data, size_t bytes, unsigned root,
                                llvm::StringRef what) = 0;

  /// Collectives called between beginGroup and endGroup go as one group
  /// (a bucket, BucketCollectives.h): NCCL launches them together, MPI has
  /// them in flight at once, so the link's latency is paid once. Each call
  /// in the group may return before its bytes have arrived; endGroup waits
  /// for all of them, and its error names the first that failed. Buffers
  /// must stay untouched until then. Groups do not nest.
  virtual void beginGroup() {}
  virtual llvm::Error endGroup() { return llvm::Error::success(); }

  CollectiveBytes &bytes() { return counters; }

private:
  CollectiveBytes counters;
};

/// One rank: collectives are local copies (a plan for one rank has none,
/// but tests and --ranks=1 tools may call them).
std::unique_ptr<Communicator> createSelfCommunicator();

/// Whether this process was started by an MPI launcher (mpirun, srun):
/// what zinc-run checks before starting MPI.
bool launchedAsMpiRank();

/// MPI_COMM_WORLD, initialised on first call. Collectives give up after
/// `timeoutSeconds` without progress (a rank died or hangs) with a
/// diagnostic naming the collective.
llvm::Expected<std::unique_ptr<Communicator>> createMpiCommunicator(double timeoutSeconds);

/// Ends this rank's part in MPI (MPI_Finalize) when MPI was started; or, after
/// an error (`failed`), stops every rank (MPI_Abort) so none waits forever
/// on this one.
void finishMpi(bool failed);

} // namespace zinc::comm

#endif
