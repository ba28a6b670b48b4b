//===- DoesNotFit.h - The planner's one recoverable failure ---------------===//
//
// A plan whose tiers overflow their capacities is not a bug: the memory
// planner's search tries another configuration, and zinc-compile's budget
// retry aims tiling and checkpointing lower. Every other error inside a
// trial (a verifier failure, an unsupported case, a bug) stops the compile
// with its diagnostic. So "does not fit" is a type of its own, told apart
// by the callers that can recover from it and printed like any other error
// by those that cannot.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_PLANNING_DOESNOTFIT_H
#define ZINC_PLANNING_DOESNOTFIT_H

#include "zinc/ir/Graph.h"
#include "zinc/support/Error.h"
#include <cstdint>
#include <string>

namespace zinc::planning {

/// A tier's proven peak is above its capacity.
class DoesNotFit : public llvm::ErrorInfo<DoesNotFit, ContextualError> {
public:
  static char ID;
  DoesNotFit(ir::Tier tier, uint64_t needed, uint64_t capacity, std::string message)
      : tier(tier), needed(needed), capacity(capacity), message(std::move(message)) {}

  void log(llvm::raw_ostream &os) const override;
  std::error_code convertToErrorCode() const override;
  void prependContext(const llvm::Twine &context) override;

  ir::Tier tier;
  /// The peak the plan reached, and what the tier holds, in bytes.
  uint64_t needed;
  uint64_t capacity;
  /// The diagnostic: what to raise, and what fills the tier at its peak.
  std::string message;
};

/// What a trial's error means to a search: true when `err` is success,
/// false when it is a DoesNotFit (consumed), and the error itself for any
/// other failure, which the search must pass on.
llvm::Expected<bool> fitsUnlessFailed(llvm::Error err);

/// Whether `err` is a DoesNotFit of the GPU tier (zinc-compile's budget
/// retry); `err` is left as it was.
bool gpuDoesNotFit(llvm::Error &err);

} // namespace zinc::planning

#endif
