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
  // Every op the cpu backend trains with has a cuda kernel, ZeRO's
  // collectives and ShardOf included; Range has none, its result being
  // computed at start-up when its inputs are known. Over activations it is
  // refused, naming the op and its nodes.
  PlanBuilder b;
  int x = b.tensor("x", {4, 4}), y = b.tensor("y", {4, 4});
  int start = b.tensor("start", {}, plan::TIER_GPU, 7), limit = b.tensor("limit", {}, plan::TIER_GPU, 7);
  int step = b.tensor("step", {}, plan::TIER_GPU, 7);
  int r1 = b.tensor("r1", {4}, plan::TIER_GPU, 7), r2 = b.tensor("r2", {4}, plan::TIER_GPU, 7);
  int s1 = b.tensor("s1", {16}), g1 = b.tensor("g1", {4, 4});
  b.add("add", "Add", {x, x}, {y});
  b.add("range1", "Range", {start, limit, step}, {r1});
  b.add("range2", "Range", {start, limit, step}, {r2});
  b.add("shard", "ShardOf", {y}, {s1}).set_domain("zinc");
  b.add("gather", "AllGather", {s1}, {g1}).set_domain("zinc");
  auto program = loadOrFail(b.finish());
  ASSERT_TRUE(program);
  EXPECT_EQ(messageOf(cuda::checkCudaSupport(*program)),
            "the cuda backend has no kernel yet for Range (2 nodes); use --backend=cpu");
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
