//===- LrScheduleTest.cpp - Schedule factors against transformers' -------===//
//
// The expected factors are what transformers 4.30.2's schedulers give
// (optimizer.param_groups[0]['lr'] with lr 1.0, read before each
// optimizer.step() and scheduler.step()), printed with repr().
//
//===----------------------------------------------------------------------===//
#include "zinc/support/LrSchedule.h"
#include <gtest/gtest.h>
#include <vector>

using namespace zinc;

static void expectFactors(const LrSchedule &s,
                          const std::vector<double> &want) {
  for (size_t k = 0; k < want.size(); ++k)
    EXPECT_DOUBLE_EQ(lrFactor(s, static_cast<int64_t>(k)), want[k])
        << "update " << k;
}

// get_constant_schedule_with_warmup(opt, 3).
TEST(LrScheduleTest, ConstantWithWarmup) {
  expectFactors({LrScheduleKind::Constant, 3, 0},
                {0.0, 0.3333333333333333, 0.6666666666666666, 1.0, 1.0, 1.0});
}

// The default: no warmup, every factor 1.
TEST(LrScheduleTest, ConstantIsOne) { expectFactors({}, {1.0, 1.0, 1.0}); }

// get_linear_schedule_with_warmup(opt, 2, 10): 0 at and past T.
TEST(LrScheduleTest, LinearWithWarmup) {
  expectFactors({LrScheduleKind::Linear, 2, 10},
                {0.0, 0.5, 1.0, 0.875, 0.75, 0.625, 0.5, 0.375, 0.25, 0.125,
                 0.0, 0.0, 0.0});
}

// get_linear_schedule_with_warmup(opt, 5, 3): a warmup longer than the
// run drops to 0 at its end, as transformers does.
TEST(LrScheduleTest, LinearWarmupPastTotal) {
  expectFactors({LrScheduleKind::Linear, 5, 3},
                {0.0, 0.2, 0.4, 0.6, 0.8, 0.0, 0.0});
}

// get_cosine_schedule_with_warmup(opt, 3, 10): past T the half cosine
// rises again, as transformers' does.
TEST(LrScheduleTest, CosineWithWarmup) {
  expectFactors({LrScheduleKind::Cosine, 3, 10},
                {0.0, 0.3333333333333333, 0.6666666666666666, 1.0,
                 0.9504844339512095, 0.8117449009293668, 0.6112604669781572,
                 0.38873953302184283, 0.18825509907063326, 0.04951556604879048,
                 0.0, 0.04951556604879043, 0.18825509907063315,
                 0.3887395330218427});
}

// get_cosine_schedule_with_warmup(opt, 0, 7): starts at the full rate.
TEST(LrScheduleTest, CosineWithoutWarmup) {
  expectFactors({LrScheduleKind::Cosine, 0, 7},
                {1.0, 0.9504844339512095, 0.8117449009293668,
                 0.6112604669781572, 0.38873953302184283, 0.18825509907063326,
                 0.04951556604879048, 0.0});
}

TEST(LrScheduleTest, ReadsAttributes) {
  AttributeList attrs;
  attrs.set(makeStringAttr("lr_schedule", "cosine"));
  attrs.set(makeIntAttr("warmup_steps", 4));
  attrs.set(makeIntAttr("total_steps", 20));
  auto s = lrScheduleFromAttrs(attrs);
  ASSERT_TRUE(bool(s)) << llvm::toString(s.takeError());
  EXPECT_EQ(s->kind, LrScheduleKind::Cosine);
  EXPECT_EQ(s->warmupSteps, 4);
  EXPECT_EQ(s->totalSteps, 20);
  // No attributes: a constant rate.
  auto none = lrScheduleFromAttrs(AttributeList());
  ASSERT_TRUE(bool(none)) << llvm::toString(none.takeError());
  EXPECT_EQ(none->kind, LrScheduleKind::Constant);
  EXPECT_EQ(lrFactor(*none, 0), 1.0);
}

TEST(LrScheduleTest, RefusesBadAttributes) {
  AttributeList unknown;
  unknown.set(makeStringAttr("lr_schedule", "step"));
  EXPECT_EQ(llvm::toString(lrScheduleFromAttrs(unknown).takeError()),
            "lr_schedule 'step' is not constant, linear or cosine");
  AttributeList noTotal;
  noTotal.set(makeStringAttr("lr_schedule", "linear"));
  EXPECT_EQ(llvm::toString(lrScheduleFromAttrs(noTotal).takeError()),
            "lr_schedule 'linear' needs total_steps of at least 1");
  AttributeList negative;
  negative.set(makeIntAttr("warmup_steps", -2));
  EXPECT_EQ(llvm::toString(lrScheduleFromAttrs(negative).takeError()),
            "warmup_steps -2 and total_steps 0 must not be negative");
}
