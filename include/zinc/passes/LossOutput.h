//===- LossOutput.h - Which graph output is the loss ----------------------===//
#ifndef ZINC_PASSES_LOSSOUTPUT_H
#define ZINC_PASSES_LOSSOUTPUT_H

#include "zinc/ir/Graph.h"
#include "llvm/Support/Error.h"

namespace zinc {

/// The graph output named `name` (which must be a float scalar), or, with an
/// empty name, the only float scalar output. Errors say how to choose.
llvm::Expected<ir::Value *> findLossOutput(const ir::Graph &g, llvm::StringRef name);

} // namespace zinc

#endif
