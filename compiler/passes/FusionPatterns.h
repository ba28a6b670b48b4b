//===- FusionPatterns.h - Matching what exporters spell out op by op ------===//
//
// The fusion passes (fuse-gelu, fuse-silu, fuse-rms-norm, fuse-attention,
// fuse-masked-softmax) recognise chains of ONNX nodes; these are the
// questions they ask of a node.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_COMPILER_PASSES_FUSIONPATTERNS_H
#define ZINC_COMPILER_PASSES_FUSIONPATTERNS_H

#include "zinc/ir/Graph.h"
#include "zinc/support/Attribute.h"
#include <cmath>

namespace zinc::passes::fusion {

/// Whether `n` is the default-domain `op` with `inputs` present operands and
/// one output.
inline bool isOp(const ir::Node *n, llvm::StringRef op, size_t inputs) {
  if (!n || !n->domain.empty() || n->opType != op || n->inputs.size() != inputs ||
      n->outputs.size() != 1 || !n->outputs[0])
    return false;
  for (const ir::Value *v : n->inputs)
    if (!v)
      return false;
  return true;
}

/// The node defining `v` when it is `op` with `inputs` operands.
inline const ir::Node *defOf(const ir::Value *v, llvm::StringRef op,
                             size_t inputs) {
  return v && isOp(v->def, op, inputs) ? v->def : nullptr;
}

/// The scalar a Constant node gives `v`, or None.
inline llvm::Optional<double> constantScalar(const ir::Value *v) {
  const ir::Node *d = v ? v->def : nullptr;
  if (!d || !d->domain.empty() || d->opType != "Constant")
    return llvm::None;
  const Attribute *a = d->attrs.find("value");
  if (!a || a->kind != AttrKind::Tensor)
    return llvm::None;
  return scalarValue(a->tensor);
}

/// Whether `v` is a scalar Constant within float rounding of `want`.
inline bool isConstant(const ir::Value *v, double want) {
  llvm::Optional<double> value = constantScalar(v);
  return value && std::fabs(*value - want) <= 1e-6 * std::fabs(want);
}

/// For a binary node one of whose operands is the constant `c`: the other.
inline ir::Value *otherThanConstant(const ir::Node *n, double c) {
  if (isConstant(n->inputs[1], c))
    return n->inputs[0];
  if (isConstant(n->inputs[0], c))
    return n->inputs[1];
  return nullptr;
}

/// For a binary node one of whose operands is `v`: the other.
inline ir::Value *otherThan(const ir::Node *n, const ir::Value *v) {
  if (n->inputs[0] == v)
    return n->inputs[1];
  if (n->inputs[1] == v)
    return n->inputs[0];
  return nullptr;
}

/// The single node reading `v`, when `v` has exactly one use and is no
/// graph output.
inline const ir::Node *onlyUser(const ir::Graph &g, const ir::Value *v) {
  if (g.isOutput(v) || v->uses().size() != 1)
    return nullptr;
  return v->uses()[0].user;
}

/// Whether a Softmax node normalises over the last axis of its rank-`rank`
/// input, in the opset's reading of `axis` (1 by default before opset 13,
/// -1 from it).
inline bool softmaxOverLastAxis(const ir::Node &softmax, int64_t opset, size_t rank) {
  int64_t axis = softmax.attrs.getInt("axis", opset < 13 ? 1 : -1);
  if (axis < 0)
    axis += static_cast<int64_t>(rank);
  return axis == static_cast<int64_t>(rank) - 1;
}

} // namespace zinc::passes::fusion

#endif
