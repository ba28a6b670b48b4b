//===- Verifier.h - Structural invariants of the IR -----------------------===//
//
// The pass manager runs the verifier after every pass that changed the
// graph (in tests and debug builds), so a broken invariant is reported by
// the pass that broke it. Each invariant is a separate check in
// Verifier.cpp; the invariants of later passes (residency, buffer overlap,
// events) join that list as their passes arrive.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_IR_VERIFIER_H
#define ZINC_IR_VERIFIER_H

#include "zinc/ir/Graph.h"
#include "llvm/Support/Error.h"

namespace zinc::ir {

/// Checks that values and node names are unique, that initializers and
/// graph inputs have the roles they should, that shapes are static, that
/// every value is defined exactly once and before its first use, and that
/// the graph outputs are defined. Returns the first violation found, as
/// "verifier: <what>", naming the node and value.
llvm::Error verifyGraph(const Graph &g);

} // namespace zinc::ir

#endif
