//===- NodeFlops.cpp - Floating-point operations a node performs ----------===//
#include "zinc/passes/NodeFlops.h"
#include "zinc/support/MatMulGeometry.h"

namespace zinc::passes {

static uint64_t outputElements(const ir::Node &n) {
  uint64_t elements = 0;
  for (const ir::Value *out : n.outputs)
    if (out)
      elements += out->numElements();
  return elements;
}

/// zinc.Attention's products: Q Kt and P V over the (query, key) pairs it
/// computes (about half under causal). Its gradient, FlashAttention-2's
/// one pass, recomputes Q Kt and dY V^T beside dV, dKt and dQ.
static uint64_t attentionFlops(const ir::Node &n) {
  const ir::Value *q = n.inputs.size() > 2 ? n.inputs[0] : nullptr;
  const ir::Value *kt = q ? n.inputs[1] : nullptr, *v = q ? n.inputs[2] : nullptr;
  if (!q || !kt || !v || q->shape.size() < 2 || kt->shape.size() != q->shape.size() ||
      v->shape.size() != q->shape.size())
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

uint64_t estimateFlops(const ir::Node &n) {
  bool product = (n.domain.empty() && n.opType == "MatMul") ||
                 (n.domain == "zinc" &&
                  (n.opType == "FusedMatMul" || n.opType == "FusedMatMulInto"));
  if (product && n.inputs.size() >= 2 && n.inputs[0] && n.inputs[1]) {
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
  if (n.domain == "zinc" && (n.opType == "Attention" || n.opType == "AttentionGrad"))
    return attentionFlops(n);
  if (n.domain.empty() && n.opType == "Gemm" && n.inputs.size() >= 2 &&
      n.inputs[0] && n.inputs[0]->shape.size() == 2) {
    bool transA = n.attrs.getInt("transA", 0) != 0;
    uint64_t k = n.inputs[0]->shape[transA ? 0 : 1];
    return 2ull * outputElements(n) * k;
  }
  // Conv and its gradients: each output element (of the forward) sums
  // input channels per group x kernel taps; the weight has exactly those
  // per output channel.
  llvm::StringRef op(n.opType);
  bool conv = (n.domain.empty() && op == "Conv") ||
              (n.domain == "zinc" && (op.startswith("ConvGrad") || op.startswith("ConvChannels")));
  if (conv && n.inputs.size() >= 2 && n.inputs[1] && n.inputs[1]->shape.size() >= 2) {
    const ir::Value *w = n.inputs[1];
    uint64_t perOutput = w->numElements() / std::max<int64_t>(1, w->shape[0]);
    uint64_t outputs = static_cast<uint64_t>(n.inputs[0]->numElements());
    if (op == "Conv") {
      outputs = outputElements(n);
    } else if (op.startswith("ConvChannels")) {
      // A tile's channels of the output it writes.
      const ir::Value *y = op == "ConvChannels" ? n.outputs[0]
                           : n.inputs.size() > 3 ? n.inputs[3] : nullptr;
      outputs = y && y->shape.size() > 1 && y->shape[1]
                    ? y->numElements() / y->shape[1] * w->shape[0]
                    : 0;
    }
    return 2ull * outputs * perOutput;
  }
  return outputElements(n);
}

} // namespace zinc::passes
