//===- DoesNotFit.h - "Does not fit": the memory planner's one recoverable
//failure ===//
//
// A plan whose tiers overflow their capacities is not a bug: the memory
// planner's search tries another configuration, and zinc-compile's budget
// retry aims tiling and checkpointing lower. Every other error inside a
// trial (a verifier failure, an unsupported case, a bug) stops the compile
// with its diagnostic. So "does not fit", which allocate reports, is a type
// of its own, told apart by the callers that can recover from it and printed
// like any other error by those that cannot.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_PASSES_DOESNOTFIT_H
#define ZINC_PASSES_DOESNOTFIT_H

#include "zinc/ir/Graph.h"
#include "zinc/support/Error.h"
#include "llvm/ADT/Optional.h"
#include <cstdint>
#include <string>

namespace zinc::passes {

/// A tier's proven peak is above its capacity.
class DoesNotFit : public llvm::ErrorInfo<DoesNotFit, ContextualError> {
public:
  static char ID;
  DoesNotFit(ir::Tier tier, uint64_t needed, std::string message)
      : tier(tier), needed(needed), message(std::move(message)) {}

  void log(llvm::raw_ostream &os) const override;
  std::error_code convertToErrorCode() const override;
  void prependContext(const llvm::Twine &context) override;

  ir::Tier tier;
  /// The peak the plan reached, in bytes.
  uint64_t needed;
  /// The diagnostic: what to raise, and what fills the tier at its peak.
  std::string message;
  /// Set by the memory planner when another tier is named but a placement
  /// it tried overflowed the GPU: with less GPU demand (more tiles, more
  /// recompute) that placement may fit.
  bool lessGpuMayFit = false;
};

/// `err`, unless it is a DoesNotFit, which is consumed; `tier` (when
/// given) then says which tier did not fit.
llvm::Error unlessDoesNotFit(llvm::Error err,
                             llvm::Optional<ir::Tier> *tier = nullptr);

/// Whether `err` is a DoesNotFit that less GPU demand may relieve (the GPU's
/// own, or one marked lessGpuMayFit): zinc-compile's budget retry. `err` is
/// left as it was.
bool lessGpuMayFit(llvm::Error &err);

} // namespace zinc::passes

#endif
