//===- OpDefinition.h - Each op's definition, read from Ops.def -----------===//
//
// The facts about an op that the compiler, the plan verifier and the
// backends all read, from its one row in Ops.def: its domain and name, the
// element types the frontend accepts, its effects, its traits, which
// backends have kernels for it, and how much workspace its cpu kernel takes.
// The columns that name compiler code (gradient rule, FLOPs, constant
// folding) are read by the compiler's own readers of Ops.def, so this
// library links nothing of the compiler.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_OPS_OPDEFINITION_H
#define ZINC_OPS_OPDEFINITION_H

#include "zinc/ops/KernelWorkspace.h"
#include "zinc/ops/OpEffects.h"
#include "zinc/support/DType.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include <string>

namespace zinc::ops {

/// The backends that may have a kernel for an op (Ops.def's Backends).
enum Backend : unsigned {
  NoKernel = 0,
  Cpu = 1u << 0,
  Cuda = 1u << 1,
};

/// What an op is, beyond its effects (Ops.def's Traits).
enum Trait : unsigned {
  NoTraits = 0,
  /// A byte copy between tiers that the runtime runs itself.
  Transfer = 1u << 0,
  /// An optimizer update: (param, grad, states..., extras...) in place.
  OptimizerUpdate = 1u << 1,
};

/// Where a definition comes from in Ops.def.
enum class OpKind {
  Onnx,     ///< ZINC_OP: an ONNX op zinc runs
  Zinc,     ///< ZINC_ZOP: one of zinc's own ops
  FoldOnly, ///< ZINC_FOLD_ONLY_OP: an ONNX op zinc only folds from constants
};

/// One row of Ops.def.
struct OpDefinition {
  OpKind kind = OpKind::Onnx;
  /// "" for ONNX ops, kZincDomain for zinc's.
  llvm::StringRef domain;
  llvm::StringRef name;
  /// The element types the frontend accepts (ONNX ops zinc runs).
  DTypeSet types;
  OpEffects effects;
  unsigned traits = NoTraits;
  unsigned backends = NoKernel;
  /// The scratch bytes of one cpu kernel call; null: none.
  WorkspaceFn workspace = nullptr;

  bool hasTrait(Trait t) const { return (traits & t) != 0; }
  bool hasKernelOn(Backend b) const { return (backends & b) != 0; }
  /// "MatMul", "zinc.AdamW": how diagnostics and zinc-dump name it.
  std::string qualifiedName() const {
    return domain.empty() ? name.str() : domain.str() + "." + name.str();
  }
};

/// The definition of `domain`.`name`, or null. `domain` is "" for ONNX ops
/// and kZincDomain for zinc's; any other domain defines nothing.
const OpDefinition *lookupOp(llvm::StringRef domain, llvm::StringRef name);

/// Every definition, in Ops.def's order.
llvm::ArrayRef<OpDefinition> allOps();

} // namespace zinc::ops

#endif
