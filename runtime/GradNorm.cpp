//===- GradNorm.cpp - The gradient norm a step's metrics report -----------===//
#include "zinc/runtime/GradNorm.h"

namespace zinc::rt {

int64_t gradSumSquaresTensor(const plan::Plan &plan) {
  for (const plan::Instruction &inst : plan.instructions())
    if (inst.domain() == "zinc" && inst.op() == "SumGradSquares" && inst.inputs_size() > 0)
      return inst.inputs(0);
  return -1;
}

} // namespace zinc::rt
