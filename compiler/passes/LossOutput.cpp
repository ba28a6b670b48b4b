//===- LossOutput.cpp - Which graph output is the loss --------------------===//
#include "zinc/passes/LossOutput.h"
#include "zinc/support/Error.h"

namespace zinc {

llvm::Expected<ir::Value *> findLossOutput(const ir::Graph &g, llvm::StringRef name) {
  if (!name.empty()) {
    for (ir::Value *out : g.outputs())
      if (out->name == name) {
        if (out->numElements() != 1 || !isFloatDType(out->dtype))
          return makeError("--loss output '" + name + "' is " +
                           dtypeName(out->dtype) + formatShape(out->shape) +
                           ", not a float scalar");
        return out;
      }
    return makeError("--loss names '" + name + "', which is not a graph output");
  }
  ir::Value *found = nullptr;
  for (ir::Value *out : g.outputs())
    if (out->numElements() == 1 && isFloatDType(out->dtype)) {
      if (found)
        return makeError("graph outputs '" + found->name + "' and '" + out->name +
                         "' are both float scalars; choose the loss with --loss");
      found = out;
    }
  if (!found)
    return makeError("no graph output is a float scalar to use as the loss; "
                     "name one with --loss");
  return found;
}

} // namespace zinc
