//===- StagedCommunicator.cpp - Device collectives through host staging --===//
//
// Gathers and reduce-scatters exchange chunks of every rank's part: a chunk
// is elements [b, b + c) of each rank's shard, laid out in the slot as the
// part this rank sends (c elements) followed by every rank's (ranks x c),
// so that the host communicator sees a tensor of ranks x c in equal shards
// of c. The last owner's part may end before the chunk does: only what it
// owns is copied, and whatever the rest of its row holds lands only in
// shard padding, which is zeroed afterwards.
//
//===----------------------------------------------------------------------===//
#include "zinc/runtime/comm/StagedCommunicator.h"
#include "zinc/ops/KernelWorkspace.h"
#include "zinc/runtime/comm/StagingPlan.h"
#include "zinc/support/Error.h"
#include <algorithm>
#include <string>
#include <vector>

namespace zinc::comm {

StagingCopier::~StagingCopier() = default;

namespace {

class StagedCommunicator : public Communicator {
public:
  StagedCommunicator(Communicator &host, std::unique_ptr<StagingCopier> copier,
                     const StagingOptions &opts, llvm::StringRef kind)
      : host(host), copier(std::move(copier)), slotBytes(opts.slotBytes),
        slots(opts.slots), name(kind.str()) {
    // 16-bit sums and means are reduced in f32 by the host communicator.
    scratch.resize(std::min<uint64_t>(std::max<uint64_t>(slotBytes / 2, 1),
                                      kCollectiveChunkElements));
  }

  unsigned rank() const override { return host.rank(); }
  unsigned size() const override { return host.size(); }
  llvm::StringRef kind() const override { return name; }

  llvm::Error allReduce(void *data, int64_t count, DType dtype, ReduceOp op,
                        llvm::StringRef what,
                        llvm::MutableArrayRef<float>) override {
    size_t e = dtypeSize(dtype);
    auto *dev = static_cast<uint8_t *>(data);
    if (auto err = pipeline(
            count, e, what,
            [&](const StagedChunk &c, uint8_t *slot) {
              return copier->toHost(slot, dev + c.begin * e, c.count * e, what);
            },
            [&](const StagedChunk &c, uint8_t *slot) {
              return host.allReduce(slot, c.count, dtype, op, what, scratch);
            },
            [&](const StagedChunk &c, uint8_t *slot) {
              return copier->toDevice(dev + c.begin * e, slot, c.count * e,
                                      what);
            }))
      return err;
    bytes().allreduce += count * e;
    return llvm::Error::success();
  }

  llvm::Error allGather(const void *shard, void *whole, int64_t count,
                        int64_t shardCount, DType dtype,
                        llvm::StringRef what) override {
    if (auto err =
            gatherTo(shard, whole, count, shardCount, dtype, /*root=*/-1, what))
      return err;
    bytes().allgather += count * dtypeSize(dtype);
    return llvm::Error::success();
  }

  llvm::Error gather(const void *shard, void *whole, int64_t count,
                     int64_t shardCount, DType dtype, unsigned root,
                     llvm::StringRef what) override {
    return gatherTo(shard, whole, count, shardCount, dtype,
                    static_cast<int>(root), what);
  }

  llvm::Error reduceScatter(const void *whole, void *shard, int64_t count,
                            int64_t shardCount, DType dtype, ReduceOp op,
                            llvm::StringRef what,
                            llvm::MutableArrayRef<float>) override {
    size_t e = dtypeSize(dtype);
    unsigned ranks = size();
    auto *src = static_cast<const uint8_t *>(whole);
    auto *dst = static_cast<uint8_t *>(shard);
    int64_t mine = std::clamp<int64_t>(ownedElements(count, shardCount, rank()),
                                       0, shardCount);
    if (auto err = pipeline(
            shardCount, e * (ranks + 1), what,
            [&](const StagedChunk &c, uint8_t *slot) -> llvm::Error {
              uint8_t *rows = slot + c.count * e;
              for (unsigned r = 0; r < ranks; ++r)
                if (int64_t n = partOf(count, shardCount, r, c))
                  if (auto err = copier->toHost(
                          rows + r * c.count * e,
                          src + (r * shardCount + c.begin) * e, n * e, what))
                    return err;
              return llvm::Error::success();
            },
            [&](const StagedChunk &c, uint8_t *slot) {
              return host.reduceScatter(slot + c.count * e, slot,
                                        ranks * c.count, c.count, dtype, op,
                                        what, scratch);
            },
            [&](const StagedChunk &c, uint8_t *slot) -> llvm::Error {
              if (int64_t n = partOf(count, shardCount, rank(), c))
                return copier->toDevice(dst + c.begin * e, slot, n * e, what);
              return llvm::Error::success();
            }))
      return err;
    if (mine < shardCount)
      if (auto err =
              copier->zeroDevice(dst + mine * e, (shardCount - mine) * e, what))
        return err;
    bytes().reduceScatter += count * e;
    return llvm::Error::success();
  }

  llvm::Error broadcast(void *data, size_t n, unsigned root,
                        llvm::StringRef what) override {
    auto *dev = static_cast<uint8_t *>(data);
    bool isRoot = rank() == root;
    return pipeline(
        static_cast<int64_t>(n), 1, what,
        [&](const StagedChunk &c, uint8_t *slot) -> llvm::Error {
          if (!isRoot)
            return llvm::Error::success();
          return copier->toHost(slot, dev + c.begin, c.count, what);
        },
        [&](const StagedChunk &c, uint8_t *slot) {
          return host.broadcast(slot, c.count, root, what);
        },
        [&](const StagedChunk &c, uint8_t *slot) -> llvm::Error {
          if (isRoot)
            return llvm::Error::success();
          return copier->toDevice(dev + c.begin, slot, c.count, what);
        });
  }

  // Each collective completes its exchanges before it returns (its slots
  // are reused by the next), so a bucket's members simply run in turn.
  void beginGroup() override {}
  llvm::Error endGroup() override { return llvm::Error::success(); }

private:
  /// Elements of rank r's part in chunk c of a tensor of `count` elements in
  /// shards of `shardCount` (the last owner's part may end early).
  static int64_t partOf(int64_t count, int64_t shardCount, unsigned r,
                        const StagedChunk &c) {
    int64_t owned = ownedElements(count, shardCount, r);
    return std::clamp<int64_t>(owned - c.begin, 0, c.count);
  }

  /// All-gather (root < 0) or gather to `root` of every rank's shard.
  llvm::Error gatherTo(const void *shard, void *whole, int64_t count,
                       int64_t shardCount, DType dtype, int root,
                       llvm::StringRef what) {
    size_t e = dtypeSize(dtype);
    unsigned ranks = size();
    auto *src = static_cast<const uint8_t *>(shard);
    auto *dst = static_cast<uint8_t *>(whole);
    bool receives = root < 0 || static_cast<unsigned>(root) == rank();
    return pipeline(
        shardCount, e * (ranks + 1), what,
        [&](const StagedChunk &c, uint8_t *slot) -> llvm::Error {
          if (int64_t n = partOf(count, shardCount, rank(), c))
            return copier->toHost(slot, src + c.begin * e, n * e, what);
          return llvm::Error::success();
        },
        [&](const StagedChunk &c, uint8_t *slot) {
          uint8_t *rows = slot + c.count * e;
          return root < 0
                     ? host.allGather(slot, rows, ranks * c.count, c.count,
                                      dtype, what)
                     : host.gather(slot, rows, ranks * c.count, c.count, dtype,
                                   static_cast<unsigned>(root), what);
        },
        [&](const StagedChunk &c, uint8_t *slot) -> llvm::Error {
          if (!receives)
            return llvm::Error::success();
          uint8_t *rows = slot + c.count * e;
          for (unsigned r = 0; r < ranks; ++r)
            if (int64_t n = partOf(count, shardCount, r, c))
              if (auto err =
                      copier->toDevice(dst + (r * shardCount + c.begin) * e,
                                       rows + r * c.count * e, n * e, what))
                return err;
          return llvm::Error::success();
        });
  }

  /// Runs the staging plan of `elements` (each taking `perElement` bytes of
  /// a slot): `toHost` and `toDevice` queue copies, `exchange` is the host's.
  template <typename ToHost, typename Exchange, typename ToDevice>
  llvm::Error pipeline(int64_t elements, uint64_t perElement,
                       llvm::StringRef what, ToHost toHost, Exchange exchange,
                       ToDevice toDevice) {
    if (perElement > slotBytes)
      return makeError(what + ": " + llvm::Twine(size()) +
                       " ranks need more than a staging slot of " +
                       llvm::Twine(slotBytes) + " bytes per element");
    StagingPlan plan = planStaging(elements, perElement, slotBytes, slots);
    uint8_t *base = copier->slotMemory();
    for (const StageStep &step : plan.steps) {
      const StagedChunk &c = plan.chunks[step.chunk];
      uint8_t *slot = base + c.slot * slotBytes;
      switch (step.kind) {
      case StageStepKind::ToHost:
        if (auto err = toHost(c, slot))
          return err;
        if (auto err = copier->markToHost(c.slot))
          return err;
        break;
      case StageStepKind::Exchange:
        if (auto err = copier->waitToHost(c.slot, what))
          return err;
        if (auto err = exchange(c, slot))
          return err;
        break;
      case StageStepKind::ToDevice:
        if (auto err = toDevice(c, slot))
          return err;
        break;
      }
    }
    return llvm::Error::success();
  }

  Communicator &host;
  std::unique_ptr<StagingCopier> copier;
  uint64_t slotBytes;
  unsigned slots;
  std::string name;
  std::vector<float> scratch;
};

} // namespace

llvm::Expected<std::unique_ptr<Communicator>>
createStagedCommunicator(Communicator &host,
                         std::unique_ptr<StagingCopier> copier,
                         const StagingOptions &opts, llvm::StringRef kind) {
  if (opts.slots == 0 || opts.slotBytes == 0)
    return makeError(
        "staging collectives needs at least one slot of some bytes");
  return std::unique_ptr<Communicator>(std::make_unique<StagedCommunicator>(
      host, std::move(copier), opts, kind));
}

} // namespace zinc::comm
