//===- LrSchedule.h - Learning-rate schedules of transformers' Trainer ----===//
//
// The factor by which an optimizer update scales its base learning rate:
// transformers' get_constant_schedule_with_warmup, get_linear_schedule_with_
// warmup and get_cosine_schedule_with_warmup (num_cycles 0.5), computed in
// double as Python does. The optimizer nodes carry the schedule as
// attributes (lr_schedule, warmup_steps, total_steps); every backend's
// update calls lrFactor with the number of updates applied before it, which
// is what LambdaLR's last_epoch is when the scheduler steps once after each
// optimizer step. lrFactor is marked for the GPU in .cu files, where fp16
// loss scaling keeps that count on the device.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_SUPPORT_LRSCHEDULE_H
#define ZINC_SUPPORT_LRSCHEDULE_H

#include "zinc/support/Attribute.h"
#include "llvm/Support/Error.h"
#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define ZINC_LR_HD __host__ __device__ inline
#else
#define ZINC_LR_HD inline
#endif

namespace zinc {

enum class LrScheduleKind : int32_t { Constant = 0, Linear = 1, Cosine = 2 };

/// A schedule as the plan holds it. The default is a constant rate.
struct LrSchedule {
  LrScheduleKind kind = LrScheduleKind::Constant;
  int64_t warmupSteps = 0;
  /// Linear and cosine decay: the update count at which the decay ends.
  int64_t totalSteps = 0;
};

/// The factor of update `k` (0-based: k updates were applied before it).
ZINC_LR_HD double lrFactor(const LrSchedule &s, int64_t k) {
  double step = static_cast<double>(k);
  if (k < s.warmupSteps)
    return step / static_cast<double>(s.warmupSteps > 1 ? s.warmupSteps : 1);
  if (s.kind == LrScheduleKind::Constant)
    return 1.0;
  int64_t span = s.totalSteps - s.warmupSteps;
  double denom = static_cast<double>(span > 1 ? span : 1);
  if (s.kind == LrScheduleKind::Linear) {
    double f = static_cast<double>(s.totalSteps - k) / denom;
    return f > 0.0 ? f : 0.0;
  }
  // Past totalSteps the cosine rises again, as transformers' does.
  double progress = static_cast<double>(k - s.warmupSteps) / denom;
  double f = 0.5 * (1.0 + cos(M_PI * 0.5 * 2.0 * progress));
  return f > 0.0 ? f : 0.0;
}

/// The schedule an optimizer node's attributes name (lr_schedule "constant",
/// "linear" or "cosine", absent: constant; warmup_steps; total_steps), or an
/// error naming the attribute that is not one.
llvm::Expected<LrSchedule> lrScheduleFromAttrs(const AttributeList &attrs);

} // namespace zinc

#endif
