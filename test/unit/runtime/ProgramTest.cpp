//===- ProgramTest.cpp - Loading multi-tier plans: arenas and checks ------===//
#include "PlanBuilder.h"

using namespace zinc;
using namespace zinc::rt;
using namespace zinc::rt::test;

namespace {

std::string loadError(plan::Plan plan, const LoadOptions &opts = {}) {
  return errorOf(Program::fromPlan(std::move(plan), opts));
}

/// What loading `plan` as zinc-run loads a file says: the plan verifier
/// refuses a corrupt plan before anything is laid out.
std::string checkedLoadError(plan::Plan plan, const LoadOptions &opts = {}) {
  plan.set_model_path("/models/m.onnx");
  return errorOf(Program::fromPlanChecked(std::move(plan), opts, "p.zplan"));
}

// A compute instruction that reads a CPU-tier tensor: the plan forgot the
// prefetch.
TEST(Program, ComputeReadingCpuTensorIsRefused) {
  PlanBuilder b;
  int x = b.tensor("x", {4}, plan::TIER_GPU, 1, plan::ROLE_INPUT);
  int w = b.tensor("w", {4}, plan::TIER_CPU, 1, plan::ROLE_PARAMETER);
  int y = b.tensor("y", {4});
  b.add("add", "Add", {x, w}, {y});
  EXPECT_EQ(checkedLoadError(b.finish()),
            "p.zplan: plan verifier: node 'add' (Add) on the compute stream "
            "reads tensor 'w' which is in the cpu tier");
}

// A transfer stream copies in its own direction only.
TEST(Program, TransferStreamsHaveDirections) {
  PlanBuilder b;
  int g1 = b.tensor("g1", {4}, plan::TIER_GPU, 1, plan::ROLE_INPUT);
  int g2 = b.tensor("g2", {4});
  b.add("fetch", "Copy", {g1}, {g2}, plan::STREAM_H2D);
  EXPECT_EQ(checkedLoadError(b.finish()),
            "p.zplan: plan verifier: node 'fetch' (zinc.Copy) on the h2d "
            "stream copies tensor 'g1' in the gpu tier to tensor 'g2' in the "
            "gpu tier; h2d copies cpu -> gpu");
}

// A wait on an event signalled only later in plan order would hang the
// step.
TEST(Program, UnsatisfiableWaitIsRefused) {
  PlanBuilder b;
  int a = b.tensor("a", {4}, plan::TIER_GPU, 1, plan::ROLE_INPUT);
  int cpuA = b.tensor("a.cpu", {4}, plan::TIER_CPU);
  int r = b.tensor("r", {4});
  b.add("relu", "Relu", {a}, {r}, plan::STREAM_COMPUTE, {0});
  b.add("evict", "Copy", {a}, {cpuA}, plan::STREAM_D2H, {}, {0});
  EXPECT_EQ(checkedLoadError(b.finish()),
            "p.zplan: plan verifier: node 'relu' (Relu) on the compute stream "
            "waits on event 0, which node 'evict' (zinc.Copy) signals later");
}

// A copy onto itself is not the verifier's to refuse; the loader does.
TEST(Program, CopyOntoItselfIsRefused) {
  PlanBuilder b;
  int x = b.tensor("x", {4}, plan::TIER_GPU, 1, plan::ROLE_INPUT);
  b.add("self", "Copy", {x}, {x});
  EXPECT_EQ(checkedLoadError(b.finish()),
            "p.zplan: corrupt plan: node 'self' (Copy) copies 'x' onto itself");
}

// What else the loader refuses that the verifier does not prove: a shard
// that is not one rank's share of its whole, an NVMe tier not aligned to
// the sectors O_DIRECT moves, an op zinc does not declare or the cpu
// backend cannot run.
TEST(Program, LoaderChecksBeyondTheVerifier) {
  PlanBuilder b;
  int x = b.tensor("x", {4}, plan::TIER_GPU, 1, plan::ROLE_INPUT);
  int y = b.tensor("y", {4});
  b.add("relu", "Relu", {x}, {y});
  b.plan.mutable_tensors(x)->add_shard_of(5);
  EXPECT_EQ(checkedLoadError(b.finish()),
            "p.zplan: corrupt plan: tensor 'x' [4] is not one rank's shard of "
            "[5] over 1 ranks");

  PlanBuilder c;
  c.setAlignment(plan::TIER_NVME, 64);
  int n = c.tensor("n", {4}, plan::TIER_NVME, 1, plan::ROLE_STATE);
  int h = c.tensor("h", {4}, plan::TIER_CPU);
  c.add("read", "Copy", {n}, {h}, plan::STREAM_NVME);
  LoadOptions opts;
  opts.nvmeDir = "/nonexistent";
  EXPECT_EQ(checkedLoadError(c.finish(), opts),
            "p.zplan: corrupt plan: the NVMe tier's alignment is 64; NVMe "
            "transfers need a multiple of 4096");

  PlanBuilder d;
  int u = d.tensor("u", {4}, plan::TIER_GPU, 1, plan::ROLE_INPUT);
  int v = d.tensor("v", {4});
  d.add("odd", "Frobnicate", {u}, {v});
  EXPECT_EQ(checkedLoadError(d.finish()),
            "p.zplan: node 'odd' (Frobnicate): the cpu backend has no kernel "
            "for it");
  d.plan.mutable_instructions(0)->set_domain("zinc");
  EXPECT_EQ(checkedLoadError(d.finish()),
            "p.zplan: corrupt plan: node 'odd' (Frobnicate): zinc declares no "
            "op 'Frobnicate' in its domain");
}

// Every tensor lies inside its tier's proven peak, and the peak inside the
// tier's capacity: the arenas are mapped at exactly that size.
TEST(Program, TensorOutsideItsTierIsRefused) {
  PlanBuilder b;
  int x = b.tensor("x", {4}, plan::TIER_GPU, 1, plan::ROLE_INPUT);
  int y = b.tensor("y", {100});
  b.add("relu", "Relu", {x}, {y});
  plan::Plan plan = b.finish();
  plan.mutable_tiers(0)->set_peak(128);
  EXPECT_EQ(checkedLoadError(plan),
            "p.zplan: plan verifier: tensor 'y' occupies [64, 512) of the gpu "
            "tier, past its peak 128");
  plan.mutable_tiers(0)->set_peak(1024);
  plan.mutable_tiers(0)->set_capacity(512);
  EXPECT_EQ(checkedLoadError(plan),
            "p.zplan: plan verifier: the gpu tier's peak 1024 exceeds its "
            "capacity 512");
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
