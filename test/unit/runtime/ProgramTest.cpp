//===- ProgramTest.cpp - Loading multi-tier plans: arenas and checks ------===//
#include "PlanBuilder.h"

using namespace zinc;
using namespace zinc::rt;
using namespace zinc::rt::test;

namespace {

std::string loadError(plan::Plan plan, const LoadOptions &opts = {}) {
  return errorOf(Program::fromPlan(std::move(plan), opts));
}

// A compute instruction that reads a CPU-tier tensor is refused at load:
// the plan forgot the prefetch.
TEST(Program, ComputeReadingCpuTensorIsRefused) {
  PlanBuilder b;
  int x = b.tensor("x", {4});
  int w = b.tensor("w", {4}, plan::TIER_CPU, 1, plan::ROLE_PARAMETER);
  int y = b.tensor("y", {4});
  b.add("add", "Add", {x, w}, {y});
  EXPECT_EQ(
      loadError(b.finish()),
      "node 'add' (Add) on the compute stream reads tensor 'w' in the cpu tier "
      "(missing prefetch?)");
}

// The host stream works on CPU-tier tensors only, reads and writes.
TEST(Program, HostStreamTouchingGpuTensorIsRefused) {
  PlanBuilder b;
  int p = b.tensor("p", {4}, plan::TIER_CPU);
  int g = b.tensor("g", {4});
  b.add("adam", "AdamW", {p, g}, {}, plan::STREAM_HOST);
  EXPECT_EQ(
      loadError(b.finish()),
      "node 'adam' (AdamW) on the host stream reads tensor 'g' in the gpu tier "
      "(missing eviction?)");

  PlanBuilder c;
  int x = c.tensor("x", {4}, plan::TIER_CPU), y = c.tensor("y", {4});
  c.add("relu", "Relu", {x}, {y}, plan::STREAM_HOST);
  EXPECT_EQ(loadError(c.finish()), "node 'relu' (Relu) on the host stream "
                                   "writes tensor 'y' in the gpu tier; "
                                   "the host stream works on cpu-tier tensors");
}

// Each transfer stream copies in its own direction, and runs nothing else.
TEST(Program, TransferStreamsHaveDirections) {
  PlanBuilder b;
  int g1 = b.tensor("g1", {4}), g2 = b.tensor("g2", {4});
  b.add("fetch", "Copy", {g1}, {g2}, plan::STREAM_H2D);
  EXPECT_EQ(loadError(b.finish()),
            "node 'fetch' (Copy) on the h2d stream copies tensor 'g1' in the "
            "gpu tier "
            "to tensor 'g2' in the gpu tier; the h2d stream copies cpu -> gpu");

  PlanBuilder c;
  int x = c.tensor("x", {4}), y = c.tensor("y", {4}, plan::TIER_CPU);
  c.add("evict", "CopyInto", {y, x}, {}, plan::STREAM_D2H);
  EXPECT_EQ(
      loadError(c.finish()),
      "node 'evict' (CopyInto) on the d2h stream copies tensor 'y' in the cpu "
      "tier to tensor 'x' in the gpu tier; the d2h stream copies gpu -> cpu");

  PlanBuilder d;
  int a = d.tensor("a", {4}), r = d.tensor("r", {4});
  d.add("relu", "Relu", {a}, {r}, plan::STREAM_H2D);
  EXPECT_EQ(loadError(d.finish()), "node 'relu' (Relu) on the h2d stream: "
                                   "transfer streams run only zinc.Copy "
                                   "and zinc.CopyInto");

  PlanBuilder e;
  int s = e.tensor("s", {4}, plan::TIER_CPU), t = e.tensor("t", {5});
  e.add("fetch", "Copy", {s}, {t}, plan::STREAM_H2D);
  EXPECT_EQ(loadError(e.finish()), "corrupt plan: node 'fetch' (Copy) copies "
                                   "'s' (16 bytes) into 't' (20 bytes)");
}

// A wait on an event nothing signals, or that is signalled only later in
// plan order, would hang the step: it is refused at load.
TEST(Program, UnsatisfiableWaitIsRefused) {
  PlanBuilder b;
  int x = b.tensor("x", {4}), y = b.tensor("y", {4});
  b.add("relu", "Relu", {x}, {y}, plan::STREAM_COMPUTE, {0});
  EXPECT_EQ(
      loadError(b.finish()),
      "node 'relu' (Relu) on the compute stream waits on event 0, which no "
      "instruction before it in plan order signals (the step would never "
      "finish)");

  PlanBuilder c;
  int a = c.tensor("a", {4}), cpuA = c.tensor("a.cpu", {4}, plan::TIER_CPU);
  int r = c.tensor("r", {4});
  c.add("relu", "Relu", {a}, {r}, plan::STREAM_COMPUTE, {1});
  c.add("evict", "Copy", {r}, {cpuA}, plan::STREAM_D2H, {}, {1});
  EXPECT_NE(loadError(c.finish())
                .find("waits on event 1, which no instruction before it"),
            std::string::npos);

  PlanBuilder d;
  int u = d.tensor("u", {4}), v = d.tensor("v", {4});
  d.add("relu", "Relu", {u}, {v}).add_signal_events(3);
  plan::Plan plan = d.finish();
  plan.set_num_events(2);
  EXPECT_EQ(loadError(plan),
            "corrupt plan: node 'relu' (Relu) signals event 3 of 2");
}

// Every tensor lies inside its tier's proven peak.
TEST(Program, TensorOutsideItsTierIsRefused) {
  PlanBuilder b;
  int x = b.tensor("x", {4}), y = b.tensor("y", {100});
  b.add("relu", "Relu", {x}, {y});
  plan::Plan plan = b.finish();
  plan.mutable_tiers(0)->set_peak(128);
  EXPECT_EQ(loadError(plan),
            "corrupt plan: tensor 'y' occupies bytes [64, 512) of "
            "the gpu tier, past its proven peak 128");
  plan.mutable_tiers(0)->set_peak(1024);
  plan.mutable_tensors(1)->set_offset(32);
  EXPECT_EQ(loadError(plan),
            "corrupt plan: tensor 'y' starts at byte 32 of the gpu "
            "tier, not a multiple of its alignment 64");
}

// The arenas: the GPU arena reserves the plan's capacity, opens the proven
// peak, and tensors sit at their offsets; the CPU arena is page aligned.
TEST(Program, ArenasFollowThePlan) {
  PlanBuilder b;
  b.setGpuCapacity(1 << 20);
  b.setAlignment(plan::TIER_CPU, 4096);
  int x = b.tensor("x", {4}), y = b.tensor("y", {4});
  int c = b.tensor("c", {4}, plan::TIER_CPU),
      d = b.tensor("d", {4}, plan::TIER_CPU);
  b.add("relu", "Relu", {x}, {y});
  std::unique_ptr<Program> p = loadOrFail(b.finish());
  ASSERT_TRUE(p);
  EXPECT_EQ(p->gpuArena().reserved() >= (1u << 20), true);
  EXPECT_EQ(p->gpuArena().size(), 4096u);
  EXPECT_EQ(p->tensor(y).data, p->gpuArena().base() + 64);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p->cpuArena().base()) % 4096, 0u);
  EXPECT_EQ(p->tensor(c).data, p->cpuArena().base());
  EXPECT_EQ(p->tensor(d).data, p->cpuArena().base() + 4096);
  EXPECT_EQ(p->place(d).extent, 4096u);
  // Past the proven peak the arena is not readable or writable: a kernel
  // that strays outside its tensors faults instead of reading other memory.
  volatile uint8_t *past = p->gpuArena().base() + p->gpuArena().size();
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  EXPECT_DEATH(*past = 1, "");
  // State starts at zero.
  for (float f : values(*p, d))
    EXPECT_EQ(f, 0.0f);
}

// A plan with NVMe tensors needs a directory for the tier.
TEST(Program, NvmeTierNeedsADirectory) {
  PlanBuilder b;
  int n = b.tensor("n", {1000}, plan::TIER_NVME, 1, plan::ROLE_STATE);
  int c = b.tensor("c", {1000}, plan::TIER_CPU);
  b.add("read", "Copy", {n}, {c}, plan::STREAM_NVME);
  EXPECT_EQ(loadError(b.finish()),
            "the plan keeps 4096 bytes in the NVMe tier; give --nvme-dir=DIR");
}

} // namespace
