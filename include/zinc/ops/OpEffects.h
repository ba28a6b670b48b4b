//===- OpEffects.h - What each op does to its operands, as declared -------===//
//
// One declaration, read by every pass, the plan emitter, the plan verifier
// and the runtime: which inputs an op only reads and which it updates in
// place. ONNX ops are pure (they read their inputs and write only their
// outputs); zinc's own ops declare their effects in Ops.def. Nothing in
// zinc infers effects from a node's outputs.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_OPS_OPEFFECTS_H
#define ZINC_OPS_OPEFFECTS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringRef.h"

namespace zinc {

/// The domain of zinc's own ops.
inline constexpr llvm::StringLiteral kZincDomain = "zinc";

/// How an op touches its operands.
struct OpEffects {
  /// Input positions the op updates in place (it may read them too),
  /// ascending. Positions past an instance's inputs, or naming an absent
  /// optional input, write nothing.
  llvm::ArrayRef<unsigned> writtenInputs;
  /// Every input is updated in place: WritesAll (a bucket of
  /// in-place collectives), or the conservative answer about an undeclared
  /// op.
  bool writesEveryInput = false;

  bool writesInput(unsigned i) const {
    return writesEveryInput || llvm::is_contained(writtenInputs, i);
  }
  /// Whether running the op changes anything besides its outputs: such a
  /// node is never dead, and never moved past another access to what it
  /// writes.
  bool updatesInPlace() const {
    return writesEveryInput || !writtenInputs.empty();
  }
};

/// The effects of an op, or null for a zinc-domain op that Ops.def does
/// not declare (the IR verifier refuses those). Every default-domain (ONNX)
/// op is pure.
const OpEffects *lookupOpEffects(llvm::StringRef domain, llvm::StringRef opType);

/// lookupOpEffects, for ops already verified to exist; an undeclared zinc op
/// is taken to write every input, the conservative answer.
const OpEffects &opEffects(llvm::StringRef domain, llvm::StringRef opType);

/// Whether the runtime runs the op itself (byte copies) rather than a kernel.
bool isTransferOp(llvm::StringRef domain, llvm::StringRef opType);

} // namespace zinc

#endif
