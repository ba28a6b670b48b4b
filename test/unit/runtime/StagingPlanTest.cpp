//===- StagingPlanTest.cpp - Chunks of a collective staged via the host --===//
#include "zinc/runtime/comm/StagingPlan.h"
#include "gtest/gtest.h"
#include <map>

using namespace zinc::comm;

namespace {

std::string render(const StagingPlan &plan) {
  std::string s;
  for (const StageStep &step : plan.steps) {
    s += step.kind == StageStepKind::ToHost     ? "H"
         : step.kind == StageStepKind::Exchange ? "X"
                                                : "D";
    s += std::to_string(step.chunk) + " ";
  }
  return s;
}

/// What every plan must be: chunks that tile [0, elements) within a slot,
/// slots in rotation, each chunk's steps once and in order, exchanges in
/// chunk order, and a slot refilled only after its last chunk went back.
void checkPlan(const StagingPlan &plan, int64_t elements, uint64_t perElement,
               uint64_t slotBytes, unsigned slots) {
  int64_t next = 0;
  for (size_t k = 0; k < plan.chunks.size(); ++k) {
    const StagedChunk &c = plan.chunks[k];
    EXPECT_EQ(c.begin, next);
    EXPECT_GT(c.count, 0);
    EXPECT_LE(uint64_t(c.count) * perElement, slotBytes);
    EXPECT_EQ(c.slot, k % slots);
    next += c.count;
  }
  EXPECT_EQ(next, elements);
  ASSERT_EQ(plan.steps.size(), 3 * plan.chunks.size());
  std::map<unsigned, int> stage;        // chunk -> steps seen
  std::map<unsigned, int> slotBusyWith; // slot -> chunk not yet sent back
  int lastExchange = -1;
  for (const StageStep &step : plan.steps) {
    ASSERT_LT(step.chunk, plan.chunks.size());
    unsigned slot = plan.chunks[step.chunk].slot;
    int want = step.kind == StageStepKind::ToHost     ? 0
               : step.kind == StageStepKind::Exchange ? 1
                                                      : 2;
    EXPECT_EQ(stage[step.chunk], want) << "chunk " << step.chunk;
    stage[step.chunk] = want + 1;
    if (step.kind == StageStepKind::ToHost) {
      EXPECT_EQ(slotBusyWith.count(slot), 0u)
          << "slot " << slot << " refilled early";
      slotBusyWith[slot] = step.chunk;
    } else if (step.kind == StageStepKind::Exchange) {
      EXPECT_EQ(int(step.chunk), lastExchange + 1);
      lastExchange = step.chunk;
    } else {
      slotBusyWith.erase(slot);
    }
  }
}

// Two slots: the next chunk is on its way to the host while one is exchanged.
TEST(StagingPlan, TwoSlotsOverlapCopyAndExchange) {
  StagingPlan plan = planStaging(10, 4, 16, 2);
  ASSERT_EQ(plan.chunks.size(), 3u);
  EXPECT_EQ(plan.chunks[2].begin, 8);
  EXPECT_EQ(plan.chunks[2].count, 2);
  EXPECT_EQ(render(plan), "H0 H1 X0 D0 H2 X1 D1 X2 D2 ");
  checkPlan(plan, 10, 4, 16, 2);
}

// One slot is strictly one chunk after another.
TEST(StagingPlan, OneSlotIsSequential) {
  StagingPlan plan = planStaging(3, 8, 8, 1);
  EXPECT_EQ(render(plan), "H0 X0 D0 H1 X1 D1 H2 X2 D2 ");
  checkPlan(plan, 3, 8, 8, 1);
}

// Gathers hold every rank's part and the sent one: (ranks + 1) per element.
TEST(StagingPlan, GathersFitEveryRanksPartInASlot) {
  unsigned ranks = 2;
  uint64_t e = 2; // bf16
  StagingPlan plan = planStaging(1000, (ranks + 1) * e, 1024, 2);
  EXPECT_EQ(plan.chunks[0].count, 170);
  checkPlan(plan, 1000, (ranks + 1) * e, 1024, 2);
}

// Nothing to send is no step; fewer chunks than slots still completes.
TEST(StagingPlan, SmallAndEmpty) {
  EXPECT_TRUE(planStaging(0, 4, 64, 2).steps.empty());
  StagingPlan one = planStaging(5, 4, 64, 3);
  EXPECT_EQ(render(one), "H0 X0 D0 ");
  checkPlan(one, 5, 4, 64, 3);
}

// Many shapes against the invariants.
TEST(StagingPlan, Invariants) {
  for (int64_t n : {1, 2, 7, 64, 1000, 4097})
    for (unsigned slots : {1u, 2u, 3u, 4u})
      for (uint64_t slotBytes : {4u, 12u, 100u, 4096u}) {
        StagingPlan plan = planStaging(n, 4, slotBytes, slots);
        checkPlan(plan, n, 4, slotBytes, slots);
      }
}

} // namespace
