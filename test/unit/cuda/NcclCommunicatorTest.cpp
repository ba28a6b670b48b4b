//===- NcclCommunicatorTest.cpp - The cuda backend's collectives ----------===//
//
// Without a device, making an NCCL communicator fails with a diagnostic
// instead of crashing. With one, a one-rank communicator (bootstrapped over
// the one-rank communicator, as zinc-run's rank 0 bootstraps over MPI) runs
// every collective zinc's plans use on device memory, for odd counts and
// the 16-bit types, and counts their bytes as the MPI path does.
//
//===----------------------------------------------------------------------===//
#include "test/unit/cuda/ErrorAssertions.h"
#include "zinc/runtime/cuda/Device.h"
#include "zinc/runtime/cuda/NcclCommunicator.h"
#include "zinc/support/Float16.h"
#include "gtest/gtest.h"
#include <cuda_runtime_api.h>
#include <string>
#include <vector>

using namespace zinc;
using namespace zinc::cuda;

namespace {

int deviceCount() {
  llvm::Expected<int> count = cudaDeviceCount();
  if (!count) {
    llvm::consumeError(count.takeError());
    return 0;
  }
  return *count;
}

TEST(NcclNoDevice, CreatingOneSaysThereIsNoDevice) {
  if (deviceCount() > 0)
    GTEST_SKIP() << "this machine has a CUDA device";
  auto bootstrap = comm::createSelfCommunicator();
  auto nccl = createNcclCommunicator(*bootstrap, nullptr, 10.0);
  ASSERT_FALSE(static_cast<bool>(nccl));
  EXPECT_EQ(llvm::toString(nccl.takeError()),
            "rank 0: NCCL needs a CUDA device, and this process has none");
}

/// A one-rank NCCL communicator on a stream of its own, and device buffers.
class NcclOneRank : public ::testing::Test {
protected:
  void SetUp() override {
    if (deviceCount() == 0)
      GTEST_SKIP() << "no CUDA device";
    auto s = Stream::create();
    ASSERT_TRUE(static_cast<bool>(s)) << llvm::toString(s.takeError());
    stream = std::move(*s);
    bootstrap = comm::createSelfCommunicator();
    auto made = createNcclCommunicator(*bootstrap, stream.get(), 30.0);
    ASSERT_TRUE(static_cast<bool>(made)) << llvm::toString(made.takeError());
    nccl = std::move(*made);
  }
  void TearDown() override {
    for (void *p : buffers)
      cudaFree(p);
  }

  template <typename T> void *upload(const std::vector<T> &host) {
    void *dev = nullptr;
    EXPECT_EQ(cudaMalloc(&dev, host.size() * sizeof(T) + 256), cudaSuccess);
    buffers.push_back(dev);
    EXPECT_EQ(cudaMemcpy(dev, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
              cudaSuccess);
    return dev;
  }
  template <typename T> std::vector<T> download(const void *dev, size_t count) {
    std::vector<T> host(count);
    EXPECT_EQ(cudaMemcpy(host.data(), dev, count * sizeof(T), cudaMemcpyDeviceToHost),
              cudaSuccess);
    return host;
  }

  Stream stream;
  std::unique_ptr<comm::Communicator> bootstrap;
  std::unique_ptr<comm::Communicator> nccl;
  std::vector<void *> buffers;
};

TEST_F(NcclOneRank, ReductionsOverOneRankKeepTheTensor) {
  EXPECT_EQ(nccl->size(), 1u);
  EXPECT_EQ(nccl->rank(), 0u);
  EXPECT_EQ(nccl->kind(), "NCCL");
  std::vector<float> values(1001);
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = 0.25f * static_cast<float>(i) - 100.0f;
  for (comm::ReduceOp op : {comm::ReduceOp::Sum, comm::ReduceOp::Mean, comm::ReduceOp::Max}) {
    void *dev = upload(values);
    ASSERT_NO_ERROR(nccl->allReduce(dev, 1001, DType::F32, op, "allreduce"));
    EXPECT_EQ(download<float>(dev, 1001), values);
  }
  EXPECT_EQ(nccl->bytes().allreduce.load(), 3u * 1001 * 4);

  std::vector<uint16_t> halves(77);
  for (size_t i = 0; i < halves.size(); ++i)
    halves[i] = floatToHalf(static_cast<float>(i) / 8);
  void *dev = upload(halves);
  ASSERT_NO_ERROR(nccl->allReduce(dev, 77, DType::F16, comm::ReduceOp::Mean, "f16 mean"));
  EXPECT_EQ(download<uint16_t>(dev, 77), halves);
}

TEST_F(NcclOneRank, GatherAndScatterMoveTheWholeTensor) {
  std::vector<float> values(333);
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = static_cast<float>(i);
  void *shard = upload(values);
  void *whole = upload(std::vector<float>(333, -1.0f));
  ASSERT_NO_ERROR(nccl->allGather(shard, whole, 333, 333, DType::F32, "allgather"));
  EXPECT_EQ(download<float>(whole, 333), values);
  EXPECT_EQ(nccl->bytes().allgather.load(), 333u * 4);

  void *rooted = upload(std::vector<float>(333, -1.0f));
  ASSERT_NO_ERROR(nccl->gather(shard, rooted, 333, 333, DType::F32, 0, "gather to rank 0"));
  EXPECT_EQ(download<float>(rooted, 333), values);

  void *out = upload(std::vector<float>(333, -1.0f));
  ASSERT_NO_ERROR(nccl->reduceScatter(whole, out, 333, 333, DType::F32, comm::ReduceOp::Mean,
                                      "reduce-scatter"));
  EXPECT_EQ(download<float>(out, 333), values);
  EXPECT_EQ(nccl->bytes().reduceScatter.load(), 333u * 4);
}

TEST_F(NcclOneRank, TypesNcclHasNotAreRefusedByName) {
  void *dev = upload(std::vector<uint8_t>(8, 1));
  llvm::Error err = nccl->allReduce(dev, 8, DType::Bool, comm::ReduceOp::Sum, "flags");
  ASSERT_TRUE(static_cast<bool>(err));
  EXPECT_EQ(llvm::toString(std::move(err)), "flags: NCCL has no bool type");
}

} // namespace
