//===- TrainingOptions.cpp - Hyper-parameters torch.optim would refuse ----===//
#include "zinc/passes/TrainingOptions.h"
#include "zinc/support/Error.h"
#include "llvm/ADT/Twine.h"
#include <cmath>
#include <cstdio>

namespace zinc {

/// "--flag=value", the value as %g prints it (nan, inf, -1e-08).
static std::string given(llvm::StringRef flag, double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return ("--" + flag + "=" + text).str();
}

llvm::Error checkHyperParameters(const TrainingOptions &t) {
  // torch.optim's constructors raise ValueError for these (NaN fails every
  // comparison there too); an infinite value would only make NaN weights.
  auto atLeastZero = [](llvm::StringRef flag, llvm::StringRef what,
                        double v) -> llvm::Error {
    if (v >= 0 && std::isfinite(v))
      return llvm::Error::success();
    return makeError(given(flag, v) + " is not a valid " + what +
                     ": it must be a finite number >= 0, as torch.optim "
                     "requires");
  };
  if (auto err = atLeastZero("lr", "learning rate", t.lr))
    return err;
  if (auto err = atLeastZero("eps", "epsilon", t.eps))
    return err;
  if (auto err = atLeastZero("weight-decay", "weight decay", t.weightDecay))
    return err; // the tool's "unset" (-1) never reaches here
  if (auto err = atLeastZero("momentum", "momentum", t.momentum))
    return err;
  for (auto [flag, v] : {std::pair<const char *, double>{"beta1", t.beta1},
                         std::pair<const char *, double>{"beta2", t.beta2}})
    if (!(v >= 0 && v < 1))
      return makeError(given(flag, v) +
                       " is not a valid Adam beta: it must be in [0, 1), as "
                       "torch.optim requires");
  // clip_grad_norm_ takes any number, but 0 zeroes every gradient and a
  // negative one flips them: a typo, not a recipe.
  if (t.clipGradNorm != 0 && !(t.clipGradNorm > 0 && std::isfinite(t.clipGradNorm)))
    return makeError(given("clip-grad-norm", t.clipGradNorm) +
                     " is not a valid maximum norm: it must be a finite number > 0");
  return llvm::Error::success();
}

} // namespace zinc
