//===- FiniteJson.h - JSON that stays JSON when a number is NaN or inf ----===//
//
// llvm::json prints a NaN as `nan` and an infinity as `inf`, which no JSON
// reader accepts: one diverging step would make a whole metrics file
// unreadable. Lines zinc writes for other programs go through here first.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_SUPPORT_FINITEJSON_H
#define ZINC_SUPPORT_FINITEJSON_H

#include "llvm/Support/JSON.h"

namespace zinc {

/// Replaces every NaN or infinite number anywhere in `value` (inside
/// objects and arrays too) by null. Returns whether it replaced any.
bool nullNonFiniteNumbers(llvm::json::Value &value);

/// `object` with its non-finite numbers null and, when there were any,
/// `"nonfinite": true` added, so that a reader can tell a diverged value
/// from one that was never measured.
llvm::json::Value finiteJsonObject(llvm::json::Object object);

} // namespace zinc

#endif
