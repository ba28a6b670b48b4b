//===- NodeFlops.cpp - Floating-point operations a node performs ----------===//
//
// Each op's FLOPs column in Ops.def names its function here; the others
// count one operation per output element.
//
//===----------------------------------------------------------------------===//
#include "zinc/passes/NodeFlops.h"
#include "zinc/ops/OpEffects.h"
#include "zinc/support/MatMulGeometry.h"
#include "llvm/ADT/StringMap.h"
#include <algorithm>

namespace zinc::passes {

static uint64_t outputElements(const ir::Node &n) {
  uint64_t elements = 0;
  for (const ir::Value *out : n.outputs)
    if (out)
      elements += out->numElements();
  return elements;
}

namespace flops {

/// Losses reduce their scores to a value per sample, or one: their work is
/// a pass over the scores (the largest input), not over what they output.
static uint64_t largestInput(const ir::Node &n) {
  uint64_t elements = 0;
  for (const ir::Value *in : n.inputs)
    if (in)
      elements = std::max<uint64_t>(elements, in->numElements());
  return elements;
}

/// MatMul, and zinc.FusedMatMul(Into) with their transposes and
/// flattenings: 2 m n k per matrix.
static uint64_t matMul(const ir::Node &n) {
  if (n.inputs.size() < 2 || !n.inputs[0] || !n.inputs[1])
    return outputElements(n);
  auto g = fusedMatMulGeometry(n.inputs[0]->shape, n.inputs[1]->shape, n.attrs);
  if (!g) {
    llvm::consumeError(g.takeError());
    return outputElements(n);
  }
  uint64_t full = 2ull * g->batchElements() * g->m * g->n * g->k;
  // Causal attention's products (triangular-products) skip a triangle:
  // s (s + 1) / 2 of the s^2 terms of their square side.
  uint64_t side = n.attrs.getInt("lowerY", 0)   ? g->n
                  : n.attrs.getInt("lowerA", 0) ? g->m
                  : n.attrs.getInt("lowerB", 0) ? g->n
                                                : 0;
  return side ? full / (2 * side) * (side + 1) : full;
}

/// zinc.Attention's products: Q Kt and P V over the (query, key) pairs it
/// computes (about half under causal). Its gradient, FlashAttention-2's
/// one pass, recomputes Q Kt and dY V^T beside dV, dKt and dQ.
static uint64_t attention(const ir::Node &n) {
  const ir::Value *q = n.inputs.size() > 2 ? n.inputs[0] : nullptr;
  const ir::Value *kt = q ? n.inputs[1] : nullptr,
                  *v = q ? n.inputs[2] : nullptr;
  if (!q || !kt || !v || q->shape.size() < 2 ||
      kt->shape.size() != q->shape.size() || v->shape.size() != q->shape.size())
    return outputElements(n);
  size_t r = q->shape.size();
  uint64_t tq = q->shape[r - 2], d = q->shape[r - 1], tk = kt->shape[r - 1],
           dv = v->shape[r - 1];
  uint64_t heads = tq ? q->numElements() / (tq * d ? tq * d : 1) : 0;
  uint64_t pairs = heads * tq * tk;
  if (n.attrs.getInt("causal", 0) && tq == tk)
    pairs = heads * tq * (tq + 1) / 2;
  if (n.opType == "Attention")
    return 2 * pairs * (d + dv);
  return 2 * pairs * (3 * d + 2 * dv);
}

static uint64_t gemm(const ir::Node &n) {
  if (n.inputs.size() < 2 || !n.inputs[0] || n.inputs[0]->shape.size() != 2)
    return outputElements(n);
  bool transA = n.attrs.getInt("transA", 0) != 0;
  uint64_t k = n.inputs[0]->shape[transA ? 0 : 1];
  return 2ull * outputElements(n) * k;
}

/// Conv, ConvTranspose and their gradients: one convolution each, run
/// forward, transposed or for its weight. Each element of the operand whose
/// channels are the weight's first axis (the forward Conv's output, the
/// ConvTranspose's input) meets the weight's other axes (channels per group
/// x kernel taps) once: a multiply and an add each.
static uint64_t conv(const ir::Node &n) {
  llvm::StringRef op(n.opType);
  auto in = [&](size_t i) -> const ir::Value * {
    return i < n.inputs.size() ? n.inputs[i] : nullptr;
  };
  const ir::Value *out = n.outputs.empty() ? nullptr : n.outputs[0];
  // (the weight, the operand whose channels are its first axis)
  const ir::Value *w = nullptr, *positions = nullptr;
  if (op == "Conv" || op == "ConvChannels")
    w = in(1), positions = out;
  else if (op == "ConvChannelsInto")
    w = in(1), positions = in(3);
  else if (op == "ConvTranspose" || op == "ConvGradInput")
    w = in(1), positions = in(0); // (X, W) and (dY, W)
  else if (op == "ConvGradWeight")
    w = out, positions = in(0); // (dY, X) -> dW
  else if (op == "ConvTransposeGradInput")
    w = in(1), positions = out; // (dY, W) -> dX
  else if (op == "ConvTransposeGradWeight")
    w = out, positions = in(1); // (dY, X) -> dW
  if (!w || !positions || w->shape.size() < 2 || !w->shape[0])
    return outputElements(n);
  uint64_t perPosition = w->numElements() / w->shape[0];
  uint64_t elements = static_cast<uint64_t>(positions->numElements());
  if (op.startswith("ConvChannels")) {
    // A tile's channels (the weight's first axis) of the output it writes.
    elements = positions->shape.size() > 1 && positions->shape[1]
                   ? elements / positions->shape[1] * w->shape[0]
                   : 0;
  }
  return 2ull * elements * perPosition;
}

} // namespace flops

using FlopsFn = uint64_t (*)(const ir::Node &);

/// The FLOPs column of Ops.def: ONNX ops' functions and zinc ops'.
static const std::pair<llvm::StringMap<FlopsFn>, llvm::StringMap<FlopsFn>> &
flopsTables() {
  static const auto tables = [] {
    std::pair<llvm::StringMap<FlopsFn>, llvm::StringMap<FlopsFn>> t;
#define Flops(fn) = &flops::fn;
#define OutputElements = nullptr;
#define ZINC_OP(Op, Types, Backends, Gradient, F, Workspace, Fold)             \
  t.first[#Op] F
#define ZINC_ZOP(Op, Effects, Traits, Backends, Gradient, F, Workspace)        \
  t.second[#Op] F
#include "zinc/ops/Ops.def"
#undef Flops
#undef OutputElements
    return t;
  }();
  return tables;
}

/// The op's FLOPs function, or null when Ops.def says OutputElements (or
/// does not know the op).
static FlopsFn flopsFunction(const ir::Node &n) {
  const llvm::StringMap<FlopsFn> *table =
      n.domain.empty()          ? &flopsTables().first
      : n.domain == kZincDomain ? &flopsTables().second
                                : nullptr;
  if (!table)
    return nullptr;
  auto it = table->find(n.opType);
  return it != table->end() ? it->second : nullptr;
}

uint64_t estimateFlops(const ir::Node &n) {
  FlopsFn fn = flopsFunction(n);
  return fn ? fn(n) : outputElements(n);
}

bool flopsPerOutputElement(const ir::Node &n) { return !flopsFunction(n); }

} // namespace zinc::passes
