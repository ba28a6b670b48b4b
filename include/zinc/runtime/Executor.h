//===- Executor.h - Runs a program's instructions for one step ------------===//
#ifndef ZINC_RUNTIME_EXECUTOR_H
#define ZINC_RUNTIME_EXECUTOR_H

#include "zinc/runtime/Program.h"
#include <vector>

namespace zinc::rt {

/// When one instruction ran, in seconds since the step started.
struct InstructionTiming {
  unsigned instruction = 0;
  int stream = 0;
  double start = 0;
  double end = 0;
};

struct StepResult {
  double seconds = 0;
  /// Highest GPU-arena byte any instruction of the step touched.
  uint64_t gpuHighWater = 0;
  /// Filled only when asked for (tracing).
  std::vector<InstructionTiming> timings;
};

/// Runs every instruction once, in plan order on the compute stream; `step`
/// is the 1-based step number the optimizer updates see. Errors name the
/// node: "node 'MatMul_3' (MatMul): ...".
llvm::Expected<StepResult> executeStep(Program &program, int64_t step,
                                       bool recordTimings);

} // namespace zinc::rt

#endif
