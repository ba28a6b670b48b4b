//===- RuleUtil.h - What the activation and data-movement rules share -----===//
//
// Compile-time integer operands (Constant nodes)
// and zero tensors: small things several rule files need, kept out of the
// shared GradientBuilder so that a rule family can grow them on its own.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_PASSES_AUTODIFF_RULES_RULEUTIL_H
#define ZINC_PASSES_AUTODIFF_RULES_RULEUTIL_H

#include "zinc/passes/autodiff/GradientBuilder.h"
#include "llvm/ADT/Optional.h"

namespace zinc::autodiff {

/// The integers of `v` when it is the output of a Constant node (an int32
/// or int64 `value`, or `value_int(s)`); None otherwise. Initializers are
/// not read: the compiler never reads initializer bytes.
llvm::Optional<llvm::SmallVector<int64_t, 4>> constantInts(const ir::Value *v);

/// Whether `v` has the same value at every step: a Constant node's output
/// or a non-trainable (integer) initializer.
bool isConstantOperand(const ir::Value *v);

/// A tensor of zeros of the given type (ConstantOfShape), for gradients
/// that are identically zero but must exist.
ir::Value *zeros(GradientBuilder &b, DType dtype,
                 llvm::ArrayRef<int64_t> shape);

/// `axis` made non-negative against `rank`; an error naming the op when it
/// is out of range (the forward graph passed shape inference, so this is
/// only reached with a malformed IR file).
llvm::Expected<int64_t> normalizeRuleAxis(GradientBuilder &b, int64_t axis,
                                          int64_t rank);

} // namespace zinc::autodiff

#endif
