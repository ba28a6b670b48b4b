//===- EvalProgram.h - The inference program zinc-run --eval-data runs ----===//
//
// zinc-compile embeds in every training plan the same model in inference
// form (Plan.eval: Dropout off, BatchNorm on its running statistics), whose
// tensors load from the same initializers. zinc-run --eval-data loads it
// beside the training program and, before each evaluation, copies the
// current trained weights and model state into it by initializer name.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_EVALPROGRAM_H
#define ZINC_RUNTIME_EVALPROGRAM_H

#include "zinc/runtime/Program.h"
#include "llvm/Support/Error.h"
#include <memory>

namespace zinc::rt {

/// Loads `training`'s evaluation program with `opts` (checked and verified
/// as Program::load checks a plan file), or refuses a plan that has none
/// (compiled before evaluation programs existed: compile it again).
llvm::Expected<std::unique_ptr<Program>>
loadEvalProgram(const Program &training, const LoadOptions &opts);

/// Copies `training`'s trained weights and model state (what
/// --save-weights writes, from host memory: the caller has brought the
/// state back from a device) into `eval`'s tensors of the same initializer,
/// a tile taking its slice, rounded to the tensor's type; NVMe-resident
/// ones through the NVMe tier. One initializer at a time is staged whole
/// in fp32 (forEachTrainedWeight).
llvm::Error copyTrainedWeights(Program &training, Program &eval);

} // namespace zinc::rt

#endif
