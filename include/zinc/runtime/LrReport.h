//===- LrReport.h - The learning rate each step's update uses
//--------------===//
#ifndef ZINC_RUNTIME_LRREPORT_H
#define ZINC_RUNTIME_LRREPORT_H

#include "zinc/runtime/Program.h"
#include "zinc/support/LrSchedule.h"
#include "llvm/ADT/Optional.h"
#include "llvm/Support/Error.h"

namespace zinc::rt {

/// --metrics "lr": the rate of each step's update, as the optimizer kernels
/// compute it from their node's attributes (every update of a plan carries
/// the same lr and schedule), counting updates as they do: the run's steps
/// less a delayed update's delay, or with fp16 loss scaling the steps that
/// did not overflow.
class LrReport {
public:
  /// Reads the plan's first optimizer update; with loss scaling, its count
  /// of applied steps, which must be in host memory (call it before the
  /// state goes to a device, after a resume). A plan without updates
  /// reports no rate.
  llvm::Error open(Program &program, uint64_t firstStep);
  /// The rate of the next step's update (the one it would make, if it
  /// overflows and is skipped).
  llvm::Optional<double> rate() const;
  /// After each step: whether it overflowed (loss scaling) and so applied
  /// nothing.
  void stepDone(bool skipped);

private:
  bool present = false;
  double baseLr = 0;
  LrSchedule schedule;
  int64_t delayed = 0;
  bool countsApplied = false;
  int64_t applied = 0;
};

} // namespace zinc::rt

#endif
