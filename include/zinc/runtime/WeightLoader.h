//===- WeightLoader.h - Initializers from the ONNX model into their tiers -===//
#ifndef ZINC_RUNTIME_WEIGHTLOADER_H
#define ZINC_RUNTIME_WEIGHTLOADER_H

#include "zinc/plan/PlanFile.h"
#include "zinc/runtime/cpu/Kernel.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace zinc::rt {

/// Copies every initializer the plan names into its tensor's buffer:
/// inline ones from the ONNX model file (parsed once, only if needed),
/// external ones straight from their data files. Both are read from
/// `modelDir` (PlanPaths.h): real paths inside it, regular files only.
/// Errors name the initializer and the file (missing, short, unreadable,
/// outside the directory, not a regular file). A 16-bit State
/// with an initializer (a parameter's compute-precision copy) gets the fp32
/// initializer rounded to its dtype. `loaded`, when given, runs after each
/// tensor's bytes are in its buffer (the NVMe tier stages them through one
/// host buffer and writes each out there). A shard (Tensor.shard_of) gets
/// rank `rank`'s share of its initializer. `wanted`, when given, picks the
/// tensors to load (--init=random generates the others).
llvm::Error
loadInitializers(const plan::Plan &plan, llvm::StringRef modelDir,
                 llvm::function_ref<cpu::TensorRef &(int)> tensorOf,
                 llvm::function_ref<llvm::Error(int)> loaded = nullptr,
                 unsigned rank = 0,
                 llvm::function_ref<bool(const plan::Tensor &)> wanted = nullptr);

} // namespace zinc::rt

#endif
