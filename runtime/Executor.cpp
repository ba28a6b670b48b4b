//===- Executor.cpp - One step: each instruction's kernel, in order -------===//
#include "zinc/runtime/Executor.h"
#include "zinc/support/Error.h"
#include <chrono>

namespace zinc::rt {

llvm::Expected<StepResult> executeStep(Program &program, int64_t step,
                                       bool recordTimings) {
  using Clock = std::chrono::steady_clock;
  StepResult result;
  int64_t opset = program.getPlan().opset_version();
  auto stepStart = Clock::now();
  auto secondsSince = [&](Clock::time_point t) {
    return std::chrono::duration<double>(t - stepStart).count();
  };
  unsigned index = 0;
  for (PreparedInstruction &inst : program.instructions()) {
    auto start = Clock::now();
    cpu::KernelCall call{inst.source->op(), inst.source->name(), opset,
                         inst.attrs, inst.inputs, inst.outputs, step};
    if (llvm::Error err = inst.kernel(call))
      return addContext(std::move(err), "node '" + inst.source->name() + "' (" +
                                            inst.source->op() + ")");
    result.gpuHighWater = std::max(result.gpuHighWater, inst.gpuHighWater);
    if (recordTimings)
      result.timings.push_back({index, inst.source->stream(), secondsSince(start),
                                secondsSince(Clock::now())});
    ++index;
  }
  result.seconds = secondsSince(Clock::now());
  return result;
}

} // namespace zinc::rt
