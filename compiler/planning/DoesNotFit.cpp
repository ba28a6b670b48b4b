//===- DoesNotFit.cpp - The planner's one recoverable failure -------------===//
#include "zinc/planning/DoesNotFit.h"
#include "llvm/Support/raw_ostream.h"

namespace zinc::planning {

char DoesNotFit::ID = 0;

void DoesNotFit::log(llvm::raw_ostream &os) const { os << message; }

std::error_code DoesNotFit::convertToErrorCode() const {
  return llvm::inconvertibleErrorCode();
}

void DoesNotFit::prependContext(const llvm::Twine &context) {
  message = (context + ": " + message).str();
}

llvm::Expected<bool> fitsUnlessFailed(llvm::Error err) {
  if (!err)
    return true;
  bool doesNotFit = false;
  llvm::Error rest = llvm::handleErrors(std::move(err), [&](const DoesNotFit &) {
    doesNotFit = true;
  });
  if (rest)
    return std::move(rest);
  return !doesNotFit;
}

bool gpuDoesNotFit(llvm::Error &err) {
  if (!err.isA<DoesNotFit>())
    return false;
  bool gpu = false;
  err = llvm::handleErrors(std::move(err), [&](std::unique_ptr<DoesNotFit> e) {
    gpu = e->tier == ir::Tier::Gpu;
    return llvm::Error(std::move(e));
  });
  return gpu;
}

} // namespace zinc::planning
