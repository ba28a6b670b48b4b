//===- RandomInit.h - Which tensors --init=random fills, and with what ----===//
//
// `zinc-run --init=random` (for benchmarks and from-scratch runs) gives every
// trained parameter a value from the seeded generator of
// zinc/support/RandomInit.h instead of reading the model's initializers:
//   - matrices (rank >= 2): normal(0, 0.02);
//   - rank-1 parameters the plan uses as a scale (read, through copies, as
//     the scale input of a LayerNormalization, BatchNormalization,
//     InstanceNormalization or GroupNormalization, or as a factor of a Mul,
//     as RMSNorm's weight is): 1; every other rank-1 or rank-0 one (biases): 0;
//   - BatchNorm running statistics (model state): running_var 1 (what a
//     BatchNormalization reads as input 4), the rest 0.
// "Trained" is read from the plan too: what an optimizer update writes (an
// inference plan has none: every float parameter of rank >= 1). Constants,
// frozen parameters and scalars nothing trains keep the model's values.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_RANDOMINIT_H
#define ZINC_RUNTIME_RANDOMINIT_H

#include "zinc/plan/PlanFile.h"
#include "zinc/runtime/cpu/Kernel.h"
#include "zinc/support/RandomInit.h"
#include "llvm/Support/Error.h"
#include <vector>

namespace zinc::rt {

/// What an initializer holds under --init=random.
enum class RandomFillKind {
  Normal, ///< normal(0, kRandomInitStd)
  Zero,
  One,
  Model, ///< not generated: loaded from the model as without --init=random
};

/// One tensor --init=random fills, and how.
struct RandomInitTarget {
  uint32_t tensor = 0;
  RandomFillKind kind = RandomFillKind::Zero;
  /// randomInitKey of the initializer's name.
  uint64_t key = 0;
  RandomInitIndexMap map;
};

/// The fill of each tensor with an initializer (indexed by tensor id;
/// Model for tensors without one), decided from the plan's structure alone.
std::vector<RandomFillKind> classifyRandomInit(const plan::Plan &plan);

/// The tensors rank `rank` generates (kind != Model), with each element's
/// place in its whole initializer; an error names a tensor whose tile or
/// shard does not fit its initializer.
llvm::Expected<std::vector<RandomInitTarget>>
planRandomInit(const plan::Plan &plan, unsigned rank);

/// Writes `target`'s values into `out` (its tensor's dtype and shape, in
/// host memory), under run seed `seed`, in parallel over the elements.
void fillRandomInit(const RandomInitTarget &target, cpu::TensorRef &out,
                    uint64_t seed);

} // namespace zinc::rt

#endif
