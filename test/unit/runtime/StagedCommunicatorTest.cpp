//===- StagedCommunicatorTest.cpp - Collectives staged through host slots -===//
//
// The staged communicator's chunk layouts, on the host: two and three ranks
// as threads of this process exchange through an in-process world (each
// collective a barrier, every rank reading the others' posted buffers), and
// "device" memory is host memory copied with memcpy. Slots of a few
// elements cut every collective into many chunks through both slots, shards
// are uneven (the last owner short), and each result is checked against
// what the collective means: gathers in place and no byte past the tensor,
// reduce-scatters summed with the padding zeroed, a slot exchanged only
// after its copies to the host were marked. The CUDA copier is the same
// communicator with cudaMemcpyAsync (test/unit/cuda, with a device).
//
//===----------------------------------------------------------------------===//
#include "zinc/runtime/comm/StagedCommunicator.h"
#include "zinc/support/Error.h"
#include "gtest/gtest.h"
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

using namespace zinc;
using namespace zinc::comm;

namespace {

/// The ranks of one process: each collective posts this rank's buffer,
/// waits for all, computes its result from everyone's, and waits again so
/// no buffer is reused while another rank reads it.
class World {
public:
  explicit World(unsigned n) : n(n), posted(n) {}

  void barrier() {
    std::unique_lock<std::mutex> lock(mutex);
    unsigned gen = generation;
    if (++arrived == n) {
      arrived = 0;
      ++generation;
      wake.notify_all();
      return;
    }
    wake.wait(lock, [&] { return gen != generation; });
  }

  const unsigned n;
  std::vector<const void *> posted;

private:
  std::mutex mutex;
  std::condition_variable wake;
  unsigned arrived = 0, generation = 0;
};

/// One rank of a World: f32 collectives with the Communicator's semantics.
class ThreadRank : public Communicator {
public:
  ThreadRank(World &world, unsigned r) : world(world), r(r) {}
  unsigned rank() const override { return r; }
  unsigned size() const override { return world.n; }
  llvm::StringRef kind() const override { return "threads"; }

  llvm::Error allReduce(void *data, int64_t count, DType dtype, ReduceOp op,
                        llvm::StringRef,
                        llvm::MutableArrayRef<float>) override {
    if (dtype != DType::F32)
      return makeError("the test world reduces f32 only");
    auto *x = static_cast<float *>(data);
    std::vector<float> result(count);
    exchange(x, [&] {
      for (int64_t i = 0; i < count; ++i)
        result[i] = reduce(op, [&](unsigned q) { return at(q, i); });
    });
    std::memcpy(x, result.data(), count * sizeof(float));
    world.barrier();
    return llvm::Error::success();
  }
  llvm::Error allGather(const void *shard, void *whole, int64_t count,
                        int64_t shardCount, DType dtype,
                        llvm::StringRef) override {
    return gatherTo(shard, whole, count, shardCount, dtype, -1);
  }
  llvm::Error gather(const void *shard, void *whole, int64_t count,
                     int64_t shardCount, DType dtype, unsigned root,
                     llvm::StringRef) override {
    return gatherTo(shard, whole, count, shardCount, dtype, int(root));
  }
  llvm::Error reduceScatter(const void *whole, void *shard, int64_t count,
                            int64_t shardCount, DType dtype, ReduceOp op,
                            llvm::StringRef,
                            llvm::MutableArrayRef<float>) override {
    if (dtype != DType::F32)
      return makeError("the test world reduces f32 only");
    auto *out = static_cast<float *>(shard);
    int64_t owned = ownedElements(count, shardCount, r);
    exchange(whole, [&] {
      for (int64_t i = 0; i < shardCount; ++i)
        out[i] =
            i < owned
                ? reduce(op,
                         [&](unsigned q) { return at(q, r * shardCount + i); })
                : 0.0f;
    });
    return llvm::Error::success();
  }
  llvm::Error broadcast(void *data, size_t bytes, unsigned root,
                        llvm::StringRef) override {
    exchange(data, [&] {
      if (r != root)
        std::memcpy(data, world.posted[root], bytes);
    });
    return llvm::Error::success();
  }

private:
  float at(unsigned q, int64_t i) const {
    return static_cast<const float *>(world.posted[q])[i];
  }
  float reduce(ReduceOp op, const std::function<float(unsigned)> &value) const {
    float acc = value(0);
    for (unsigned q = 1; q < world.n; ++q)
      acc = op == ReduceOp::Max ? std::max(acc, value(q)) : acc + value(q);
    return op == ReduceOp::Mean ? acc / world.n : acc;
  }
  /// Posts `mine`, runs `compute` once every rank has, and waits for all.
  template <typename Compute> void exchange(const void *mine, Compute compute) {
    world.posted[r] = mine;
    world.barrier();
    compute();
    world.barrier();
  }
  llvm::Error gatherTo(const void *shard, void *whole, int64_t count,
                       int64_t shardCount, DType dtype, int root) {
    size_t e = dtypeSize(dtype);
    exchange(shard, [&] {
      if (root >= 0 && unsigned(root) != r)
        return;
      for (unsigned q = 0; q < world.n; ++q)
        if (int64_t owned = ownedElements(count, shardCount, q); owned > 0)
          std::memcpy(static_cast<uint8_t *>(whole) + q * shardCount * e,
                      world.posted[q], owned * e);
    });
    return llvm::Error::success();
  }

  World &world;
  unsigned r;
};

/// "Device" memory is host memory; copies are memcpy, complete at once. It
/// checks the staging protocol: a slot is exchanged only after its copies
/// to the host were marked.
class MemcpyCopier : public StagingCopier {
public:
  explicit MemcpyCopier(const StagingOptions &opts)
      : memory(opts.slotBytes * opts.slots), marked(opts.slots, false) {}
  uint8_t *slotMemory() override { return memory.data(); }
  llvm::Error toHost(void *host, const void *device, uint64_t n,
                     llvm::StringRef) override {
    std::memcpy(host, device, n);
    return llvm::Error::success();
  }
  llvm::Error toDevice(void *device, const void *host, uint64_t n,
                       llvm::StringRef) override {
    std::memcpy(device, host, n);
    return llvm::Error::success();
  }
  llvm::Error zeroDevice(void *device, uint64_t n, llvm::StringRef) override {
    std::memset(device, 0, n);
    return llvm::Error::success();
  }
  llvm::Error markToHost(unsigned slot) override {
    marked.at(slot) = true;
    return llvm::Error::success();
  }
  llvm::Error waitToHost(unsigned slot, llvm::StringRef what) override {
    if (!marked.at(slot))
      return makeError(what + ": slot " + llvm::Twine(slot) +
                       " exchanged before its copies were marked");
    marked[slot] = false;
    return llvm::Error::success();
  }

private:
  std::vector<uint8_t> memory;
  std::vector<bool> marked;
};

constexpr float kGuard = -12345.0f;

/// Runs `body(rank, staged)` on every rank of a world of `ranks`, each with
/// a staged communicator of two slots of `slotBytes`.
void onRanks(unsigned ranks, uint64_t slotBytes,
             const std::function<void(unsigned, Communicator &)> &body) {
  World world(ranks);
  std::vector<std::thread> threads;
  for (unsigned r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      ThreadRank host(world, r);
      StagingOptions opts;
      opts.slotBytes = slotBytes;
      opts.slots = 2;
      auto staged = createStagedCommunicator(
          host, std::make_unique<MemcpyCopier>(opts), opts, "test");
      ASSERT_TRUE(static_cast<bool>(staged))
          << llvm::toString(staged.takeError());
      body(r, **staged);
    });
  for (std::thread &t : threads)
    t.join();
}

void expectOk(llvm::Error err) {
  EXPECT_FALSE(static_cast<bool>(err)) << llvm::toString(std::move(err));
}

/// Rank r's shard of a tensor of `count` in shards of `shard`: its owned
/// values r * 1000 + i, garbage in the padding.
std::vector<float> shardOf(unsigned r, int64_t count, int64_t shard) {
  std::vector<float> v(shard, 777.0f);
  for (int64_t i = 0; i < ownedElements(count, shard, r); ++i)
    v[i] = float(r * 1000 + i);
  return v;
}

struct Case {
  unsigned ranks;
  int64_t count;
  uint64_t slotBytes;
};
// Three ranks of 11 (shards of 4, the last owning 3) in chunks of 1 and 2
// elements; two ranks of 9 (shards of 5, the last owning 4); one element
// over three ranks (two ranks own nothing).
const Case kCases[] = {{3, 11, 16}, {3, 11, 40}, {2, 9, 24}, {3, 1, 32}};

TEST(StagedCommunicator, AllGatherPutsEveryShardInPlace) {
  for (const Case &k : kCases) {
    int64_t s = (k.count + k.ranks - 1) / k.ranks;
    onRanks(k.ranks, k.slotBytes, [&](unsigned r, Communicator &c) {
      std::vector<float> shard = shardOf(r, k.count, s);
      std::vector<float> whole(k.count + 3, kGuard);
      expectOk(c.allGather(shard.data(), whole.data(), k.count, s, DType::F32,
                           "ag"));
      for (int64_t i = 0; i < k.count; ++i)
        EXPECT_EQ(whole[i], float((i / s) * 1000 + i % s)) << "element " << i;
      for (int64_t i = k.count; i < k.count + 3; ++i)
        EXPECT_EQ(whole[i], kGuard) << "written past the tensor";
      EXPECT_EQ(c.bytes().allgather.load(), uint64_t(k.count) * 4);
    });
  }
}

TEST(StagedCommunicator, GatherFillsOnlyTheRoot) {
  for (const Case &k : kCases) {
    int64_t s = (k.count + k.ranks - 1) / k.ranks;
    unsigned root = k.ranks - 1;
    onRanks(k.ranks, k.slotBytes, [&](unsigned r, Communicator &c) {
      std::vector<float> shard = shardOf(r, k.count, s);
      std::vector<float> whole(k.count + 3, kGuard);
      expectOk(c.gather(shard.data(), r == root ? whole.data() : nullptr,
                        k.count, s, DType::F32, root, "g"));
      if (r != root)
        return;
      for (int64_t i = 0; i < k.count; ++i)
        EXPECT_EQ(whole[i], float((i / s) * 1000 + i % s)) << "element " << i;
      EXPECT_EQ(whole[k.count], kGuard);
    });
  }
}

TEST(StagedCommunicator, ReduceScatterSumsEachShardAndZeroesPadding) {
  for (const Case &k : kCases)
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Mean}) {
      int64_t s = (k.count + k.ranks - 1) / k.ranks;
      onRanks(k.ranks, k.slotBytes, [&](unsigned r, Communicator &c) {
        std::vector<float> whole(k.count);
        for (int64_t i = 0; i < k.count; ++i)
          whole[i] = float(r + 1) * 0.5f + float(i);
        std::vector<float> shard(s + 2, kGuard);
        expectOk(c.reduceScatter(whole.data(), shard.data(), k.count, s,
                                 DType::F32, op, "rs"));
        int64_t owned = ownedElements(k.count, s, r);
        for (int64_t i = 0; i < s; ++i) {
          float want = 0;
          if (i < owned) {
            for (unsigned q = 0; q < k.ranks; ++q)
              want += float(q + 1) * 0.5f + float(r * s + i);
            if (op == ReduceOp::Mean)
              want /= float(k.ranks);
          }
          EXPECT_EQ(shard[i], want) << "rank " << r << " element " << i;
        }
        EXPECT_EQ(shard[s], kGuard) << "written past the shard";
      });
    }
}

TEST(StagedCommunicator, AllReduceAndBroadcast) {
  for (const Case &k : kCases)
    onRanks(k.ranks, k.slotBytes, [&](unsigned r, Communicator &c) {
      std::vector<float> x(k.count + 1, kGuard);
      for (int64_t i = 0; i < k.count; ++i)
        x[i] = float(r * 10 + i);
      expectOk(c.allReduce(x.data(), k.count, DType::F32, ReduceOp::Max, "ar"));
      for (int64_t i = 0; i < k.count; ++i)
        EXPECT_EQ(x[i], float((k.ranks - 1) * 10 + i));
      EXPECT_EQ(x[k.count], kGuard);
      std::vector<float> b(k.count, float(r));
      expectOk(
          c.broadcast(b.data(), b.size() * sizeof(float), 1 % k.ranks, "b"));
      for (float v : b)
        EXPECT_EQ(v, float(1 % k.ranks));
    });
}

// A slot too small for one element of every rank's part is refused by name.
TEST(StagedCommunicator, SlotTooSmallForTheRanks) {
  onRanks(3, 8, [&](unsigned, Communicator &c) {
    std::vector<float> shard(1), whole(3);
    llvm::Error err =
        c.allGather(shard.data(), whole.data(), 3, 1, DType::F32, "ag");
    ASSERT_TRUE(static_cast<bool>(err));
    EXPECT_EQ(
        llvm::toString(std::move(err)),
        "ag: 3 ranks need more than a staging slot of 8 bytes per element");
  });
}

} // namespace
