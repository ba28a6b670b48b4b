//===- DoesNotFit.cpp - "Does not fit": the planner's one recoverable failure
//===//
#include "zinc/passes/DoesNotFit.h"
#include "llvm/Support/raw_ostream.h"

namespace zinc::passes {

char DoesNotFit::ID = 0;

void DoesNotFit::log(llvm::raw_ostream &os) const { os << message; }

std::error_code DoesNotFit::convertToErrorCode() const {
  return llvm::inconvertibleErrorCode();
}

void DoesNotFit::prependContext(const llvm::Twine &context) {
  message = (context + ": " + message).str();
}

llvm::Error unlessDoesNotFit(llvm::Error err, llvm::Optional<ir::Tier> *tier) {
  return llvm::handleErrors(std::move(err), [&](const DoesNotFit &e) {
    if (tier)
      *tier = e.tier;
  });
}

bool lessGpuMayFit(llvm::Error &err) {
  if (!err.isA<DoesNotFit>())
    return false;
  bool may = false;
  err = llvm::handleErrors(std::move(err), [&](std::unique_ptr<DoesNotFit> e) {
    may = e->tier == ir::Tier::Gpu || e->lessGpuMayFit;
    return llvm::Error(std::move(e));
  });
  return may;
}

} // namespace zinc::passes
