//===- MeasuredPeakTest.cpp - Peaks read from memory, scratch from the plan //
//
// The measured high-water mark of a tier is read from its arena's pages
// (mincore), not computed from the plan; a kernel's scratch is a planned
// workspace the loader checks; and a kernel that touches memory past what
// the plan proves faults.
//
//===----------------------------------------------------------------------===//
#include "PlanBuilder.h"
#include "zinc/ops/KernelWorkspace.h"
#include <csignal>

using namespace zinc;
using namespace zinc::rt;
using namespace zinc::rt::test;

namespace {

constexpr uint64_t kPage = 4096;

uint64_t touched(const Arena &arena) {
  auto bytes = arena.touchedBytes();
  EXPECT_TRUE(static_cast<bool>(bytes)) << llvm::toString(bytes.takeError());
  return bytes ? *bytes : ~uint64_t(0);
}

// A fresh arena has touched nothing; a read counts as a touch (the zero
// page is mapped in); the mark is the end of the highest page touched and
// never falls.
TEST(Arena, TouchedBytesAreReadFromTheMemory) {
  Arena arena;
  ASSERT_EQ(messageOf(arena.allocate(64 * kPage, 32 * kPage, "gpu")), "");
  EXPECT_EQ(touched(arena), 0u);
  volatile uint8_t read = arena.base()[5 * kPage + 7];
  (void)read;
  EXPECT_EQ(touched(arena), 6 * kPage);
  arena.base()[9 * kPage + 4095] = 1;
  EXPECT_EQ(touched(arena), 10 * kPage);
  arena.base()[2 * kPage] = 1;
  EXPECT_EQ(touched(arena), 10 * kPage);
  arena.base()[arena.size() - 1] = 1;
  EXPECT_EQ(touched(arena), arena.size());
  EXPECT_EQ(arena.size(), 32 * kPage);
}

// A 1 MiB table at the top of the GPU tier that nothing writes (a state,
// zero at load) and a Gather that reads its row 0 only: the measured peak
// is the end of the page holding that row, far below the proven peak that
// counting operand extents would give.
TEST(MeasuredPeak, IsWhatTheStepTouchedNotWhatThePlanNames) {
  PlanBuilder b;
  int idx = b.tensor("idx", {1}, plan::TIER_GPU, 7 /* INT64 */);
  int out = b.tensor("out", {1, 1024});
  int table =
      b.tensor("table", {256, 1024}, plan::TIER_GPU, 1, plan::ROLE_STATE);
  b.add("gather", "Gather", {table, idx}, {out});
  plan::Plan plan = b.finish();
  uint64_t tableStart = plan.tensors(table).offset();
  ASSERT_EQ(tableStart, 64u + 4096u);
  ASSERT_EQ(plan.tiers(0).peak(), tableStart + 1024 * 1024);
  std::unique_ptr<Program> program = loadOrFail(plan);
  ASSERT_TRUE(program);
  EXPECT_EQ(touched(program->gpuArena()), 0u) << "nothing was touched at load";
  for (int step = 1; step <= 2; ++step) {
    auto result = executeStep(*program, step, false);
    ASSERT_TRUE(static_cast<bool>(result))
        << llvm::toString(result.takeError());
    // Row 0 is bytes [4160, 8256): the end of page 2.
    EXPECT_EQ(result->measuredGpuPeak, 3 * kPage);
    EXPECT_EQ(result->measuredCpuPeak, 0u);
  }
}

/// A bf16 [4, 8] x [8, 4] MatMul on the compute stream, with a compute
/// workspace of `workspace` bytes (none when negative).
plan::Plan bf16MatMul(int64_t workspace) {
  PlanBuilder b;
  int a = b.tensor("a", {4, 8}, plan::TIER_GPU, 16 /* BFLOAT16 */);
  int w = b.tensor("w", {8, 4}, plan::TIER_GPU, 16);
  int y = b.tensor("y", {4, 4}, plan::TIER_GPU, 16);
  if (workspace >= 0)
    b.workspace(plan::STREAM_COMPUTE, workspace);
  b.add("mm", "MatMul", {a, w}, {y});
  return b.finish();
}

// The loader gives each kernel exactly the bytes kernelWorkspaceBytes
// counts for it, out of its stream's workspace, and refuses a plan whose
// workspace is smaller than a kernel needs, or missing.
TEST(MeasuredPeak, KernelsGetThePlannedWorkspace) {
  // f32 blocks of A [4, 8], B [8, 4] and Y [4, 4]: 128 + 128 + 64 bytes.
  const int64_t need = 320;
  {
    std::unique_ptr<Program> program = loadOrFail(bf16MatMul(need + 4096));
    ASSERT_TRUE(program);
    PreparedInstruction &mm = program->instructions()[0];
    EXPECT_EQ(mm.workspaceBytes, static_cast<uint64_t>(need));
    EXPECT_EQ(mm.workspace, static_cast<uint8_t *>(program->tensor(3).data));
    auto result = executeStep(*program, 1, false);
    EXPECT_TRUE(static_cast<bool>(result))
        << llvm::toString(result.takeError());
  }
  EXPECT_EQ(errorOf(Program::fromPlan(bf16MatMul(need - 64))),
            "node 'mm' (MatMul) needs 320 bytes of kernel workspace; the plan "
            "gives the compute stream 256 bytes");
  EXPECT_EQ(errorOf(Program::fromPlan(bf16MatMul(-1))),
            "node 'mm' (MatMul) needs 320 bytes of kernel workspace; the plan "
            "gives the compute stream none (a plan from an older "
            "zinc-compile? compile it again)");
}

// A workspace in the wrong tier for its stream is a corrupt plan, which
// the plan verifier refuses as zinc-run loads it.
TEST(MeasuredPeak, WorkspaceMustBeInItsStreamsTier) {
  PlanBuilder b;
  int ws = b.tensor("ws", {64}, plan::TIER_CPU, 2 /* UINT8 */);
  plan::Workspace *w = b.plan.add_workspaces();
  w->set_stream(plan::STREAM_COMPUTE);
  w->set_tensor(ws);
  b.plan.set_model_path("/models/m.onnx");
  EXPECT_EQ(errorOf(Program::fromPlanChecked(b.finish(), {}, "p.zplan")),
            "p.zplan: plan verifier: the compute stream's workspace tensor "
            "'ws' is in the cpu tier; the compute stream's kernels work in "
            "the gpu tier");
}

/// Writes one byte two pages past the end of its output.
llvm::Error strayKernel(const cpu::KernelCall &call) {
  cpu::TensorRef *y = call.output(0);
  static_cast<volatile uint8_t *>(y->data)[y->byteSize() + 2 * kPage] = 1;
  return llvm::Error::success();
}

// A kernel that touches memory past the tier's proven peak faults: the
// arena opens the proven peak (rounded up to a page) and no more.
TEST(MeasuredPeakDeathTest, KernelPastTheProvenPeakFaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  PlanBuilder b;
  // The tier reserves 1 MiB; the plan proves 2 KiB, so the arena opens one
  // page and the stray byte lands in the reserved, closed part.
  b.setGpuCapacity(1 << 20);
  int x = b.tensor("x", {256}), y = b.tensor("y", {256});
  b.add("relu", "Relu", {x}, {y});
  std::unique_ptr<Program> program = loadOrFail(b.finish());
  ASSERT_TRUE(program);
  // The honest kernel runs.
  ASSERT_TRUE(static_cast<bool>(executeStep(*program, 1, false)));
  program->instructions()[0].kernel = strayKernel;
#if defined(__SANITIZE_ADDRESS__)
  // AddressSanitizer catches the fault, reports it and exits.
  EXPECT_DEATH((void)executeStep(*program, 2, false), "SEGV");
#else
  EXPECT_EXIT((void)executeStep(*program, 2, false),
              ::testing::KilledBySignal(SIGSEGV), "");
#endif
}

} // namespace
