//===- StagedCommunicatorTest.cpp - Device collectives staged over MPI --===//
//
// With a device, the staged communicator over the one-rank host
// communicator, with slots of a few elements so that every collective is
// many chunks through both slots: each gives the one-rank result on device
// memory (shard padding zeroed), and counts its bytes. Without one, these
// skip; the chunk plan itself is tested on the host (StagingPlanTest.cpp).
//
//===----------------------------------------------------------------------===//
#include "zinc/runtime/cuda/StagedCommunicator.h"
#include "zinc/runtime/cuda/Device.h"
#include "gtest/gtest.h"
#include <cuda_runtime_api.h>
#include <numeric>
#include <vector>

using namespace zinc;
using namespace zinc::cuda;

namespace {

class StagedOneRank : public ::testing::Test {
protected:
  void SetUp() override {
    llvm::Expected<int> count = cudaDeviceCount();
    if (!count) {
      llvm::consumeError(count.takeError());
      GTEST_SKIP() << "no CUDA runtime";
    }
    if (*count == 0)
      GTEST_SKIP() << "no CUDA device";
    auto s = Stream::create();
    ASSERT_TRUE(static_cast<bool>(s)) << llvm::toString(s.takeError());
    stream = std::move(*s);
    host = comm::createSelfCommunicator();
    StagingOptions opts;
    opts.slotBytes = 24; // 6 floats: chunks of 6 (all-reduce) or 3 (gathers)
    opts.slots = 2;
    auto made = createStagedCommunicator(*host, stream.get(), opts);
    ASSERT_TRUE(static_cast<bool>(made)) << llvm::toString(made.takeError());
    staged = std::move(*made);
  }
  void TearDown() override {
    for (void *p : buffers)
      cudaFree(p);
  }
  void *upload(const std::vector<float> &values) {
    void *dev = nullptr;
    EXPECT_EQ(cudaMalloc(&dev, values.size() * sizeof(float)), cudaSuccess);
    buffers.push_back(dev);
    EXPECT_EQ(cudaMemcpy(dev, values.data(), values.size() * sizeof(float),
                         cudaMemcpyHostToDevice),
              cudaSuccess);
    return dev;
  }
  std::vector<float> download(const void *dev, size_t n) {
    EXPECT_FALSE(static_cast<bool>(stream.synchronize()));
    std::vector<float> out(n);
    EXPECT_EQ(
        cudaMemcpy(out.data(), dev, n * sizeof(float), cudaMemcpyDeviceToHost),
        cudaSuccess);
    return out;
  }
  static std::vector<float> iota(size_t n, float from) {
    std::vector<float> v(n);
    std::iota(v.begin(), v.end(), from);
    return v;
  }

  Stream stream;
  std::unique_ptr<comm::Communicator> host, staged;
  std::vector<void *> buffers;
};

// Seventeen elements: three chunks of six through two slots, in place.
TEST_F(StagedOneRank, AllReduceInChunks) {
  std::vector<float> x = iota(17, 1);
  void *dev = upload(x);
  ASSERT_FALSE(static_cast<bool>(
      staged->allReduce(dev, 17, DType::F32, comm::ReduceOp::Mean, "test")));
  EXPECT_EQ(download(dev, 17), x);
  EXPECT_EQ(staged->bytes().allreduce.load(), 17u * 4);
}

// Gathers and reduce-scatters in chunks of three.
TEST_F(StagedOneRank, GatherAndScatterInChunks) {
  std::vector<float> x = iota(11, 5);
  void *shard = upload(x);
  void *whole = upload(std::vector<float>(11, -1));
  ASSERT_FALSE(static_cast<bool>(
      staged->allGather(shard, whole, 11, 11, DType::F32, "g")));
  EXPECT_EQ(download(whole, 11), x);
  void *out = upload(std::vector<float>(11, -1));
  ASSERT_FALSE(static_cast<bool>(staged->reduceScatter(
      whole, out, 11, 11, DType::F32, comm::ReduceOp::Sum, "rs")));
  EXPECT_EQ(download(out, 11), x);
  void *root = upload(std::vector<float>(11, -1));
  ASSERT_FALSE(static_cast<bool>(
      staged->gather(shard, root, 11, 11, DType::F32, 0, "ga")));
  EXPECT_EQ(download(root, 11), x);
  EXPECT_EQ(staged->bytes().allgather.load(), 11u * 4);
  EXPECT_EQ(staged->bytes().reduceScatter.load(), 11u * 4);
}

// A broadcast from the only rank leaves its bytes as they were.
TEST_F(StagedOneRank, Broadcast) {
  std::vector<float> x = iota(9, 2);
  void *dev = upload(x);
  ASSERT_FALSE(
      static_cast<bool>(staged->broadcast(dev, 9 * sizeof(float), 0, "b")));
  EXPECT_EQ(download(dev, 9), x);
}

} // namespace
