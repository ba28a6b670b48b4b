//===- LrSchedule.cpp - Reading a learning-rate schedule from attributes --===//
#include "zinc/support/LrSchedule.h"
#include "zinc/support/Error.h"
#include "llvm/ADT/Twine.h"

namespace zinc {

llvm::Expected<LrSchedule> lrScheduleFromAttrs(const AttributeList &attrs) {
  LrSchedule s;
  llvm::StringRef kind = attrs.getString("lr_schedule", "constant");
  if (kind == "linear")
    s.kind = LrScheduleKind::Linear;
  else if (kind == "cosine")
    s.kind = LrScheduleKind::Cosine;
  else if (kind != "constant")
    return makeError("lr_schedule '" + kind +
                     "' is not constant, linear or cosine");
  s.warmupSteps = attrs.getInt("warmup_steps", 0);
  s.totalSteps = attrs.getInt("total_steps", 0);
  if (s.warmupSteps < 0 || s.totalSteps < 0)
    return makeError("warmup_steps " + llvm::Twine(s.warmupSteps) +
                     " and total_steps " + llvm::Twine(s.totalSteps) +
                     " must not be negative");
  if (s.kind != LrScheduleKind::Constant && s.totalSteps < 1)
    return makeError("lr_schedule '" + kind +
                     "' needs total_steps of at least 1");
  return s;
}

} // namespace zinc
