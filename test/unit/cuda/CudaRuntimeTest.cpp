//===- CudaRuntimeTest.cpp - What the cuda backend refuses, on any machine ===//
//
// The checks createCudaRuntime makes before it touches the device: a plan
// with ops the cuda backend has no kernel for is refused naming each op and
// how many nodes use it; ops whose results start-up computes on the host
// (constants, shape arithmetic) need no kernel.
//
//===----------------------------------------------------------------------===//
#include "test/unit/runtime/PlanBuilder.h"
#include "zinc/runtime/cuda/CudaRuntime.h"
#include "gtest/gtest.h"

using namespace zinc;
using namespace zinc::rt::test;

namespace {

TEST(CudaSupport, OpsWithoutKernelsAreNamedWithTheirCounts) {
  // Every op the cpu backend trains with has a cuda kernel; the partition
  // ops of ZeRO plans (collectives, ShardOf) do not yet.
  PlanBuilder b;
  int x = b.tensor("x", {4, 4}), y = b.tensor("y", {4, 4});
  int s1 = b.tensor("s1", {4, 4}), s2 = b.tensor("s2", {4, 4});
  b.add("add", "Add", {x, x}, {y});
  b.add("shard1", "ShardOf", {x}, {s1}).set_domain("zinc");
  b.add("shard2", "ShardOf", {y}, {s2}).set_domain("zinc");
  auto program = loadOrFail(b.finish());
  ASSERT_TRUE(program);
  EXPECT_EQ(messageOf(cuda::checkCudaSupport(*program)),
            "the cuda backend has no kernel yet for zinc.ShardOf (2 nodes); "
            "use --backend=cpu");
}

TEST(CudaSupport, StartUpComputesConstantsAndShapeArithmetic) {
  // Shape reads only its input's shape; Trilu of a constant is known at
  // start-up; so neither needs a kernel. The Add of activations has one.
  PlanBuilder b;
  int x = b.tensor("x", {4, 4}), shape = b.tensor("shape", {2}, plan::TIER_GPU, 7);
  int c = b.tensor("c", {4, 4}), t = b.tensor("t", {4, 4}), y = b.tensor("y", {4, 4});
  b.add("shape", "Shape", {x}, {shape});
  plan::Instruction &constant = b.add("ones", "Constant", {}, {c});
  plan::Attribute *value = constant.add_attrs();
  value->set_name("value_float");
  value->set_kind(plan::ATTR_FLOAT);
  value->set_f(1.0);
  b.add("tril", "Trilu", {c}, {t});
  b.add("add", "Add", {x, t}, {y});
  auto program = loadOrFail(b.finish());
  ASSERT_TRUE(program);
  EXPECT_EQ(messageOf(cuda::checkCudaSupport(*program)), "");
}

} // namespace
