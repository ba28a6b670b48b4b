//===- FuseAttention.cpp - fuse-attention: one zinc.Attention per head set -===//
//
// Exporters write scaled dot-product attention op by op:
//
//   S = MatMul(Q, Kt)                      Kt: the keys, transposed
//   S = Mul(S, c) | Div(S, c)              optional, c a scalar Constant
//   S = Where(mask, fill, S)               optional (masked_fill), or
//       Where(mask, S, fill)               (Hugging Face's torch.where)
//   S = Add(S, bias)                       optional (additive masks, T5's
//                                          relative position bias)
//   S = Max(S, c)                          optional, c <= -1e30 (Llama's
//                                          clamp at finfo.min)
//   P = Softmax(S) over the last axis, with no-op Casts around it
//   P = Dropout(P)                         optional
//   Y = MatMul(P, V)
//
// Before autodiff, this pass makes the chain one zinc.Attention(Q, Kt, V,
// mask?, bias?) (zinc/support/AttentionOp.h), whose kernels keep nothing of
// size [Tq, Tk]: the backward gets a per-row log-sum-exp instead of P, so
// activation memory, tiling and checkpointing see O(T) per head, not O(T^2).
// A Constant mask that is exactly causal (set above the diagonal) becomes
// the causal attribute, so the kernels skip the zero triangle. A training
// Dropout's ratio moves onto the node; build-training stamps its seed_id,
// and the mask is the one a Dropout on P would draw.
//
// Left unfused (the ops then train as before): heads wider than the
// kernels' kMaxHeadDim, leading axes that broadcast, an intermediate read
// elsewhere (a model returning its attention weights), Where's clamp
// replaced by anything else, and a bias that may be trained but is
// broadcast inside its [Tq, Tk] matrices.
//
//===----------------------------------------------------------------------===//
#include "compiler/passes/FusionPatterns.h"
#include "zinc/passes/DropoutLowering.h"
#include "zinc/passes/Pass.h"
#include "zinc/support/AttentionOp.h"
#include "llvm/ADT/DenseSet.h"
#include <cmath>

namespace zinc::passes {
using fusion::constantScalar;
using fusion::onlyUser;
using fusion::softmaxOverLastAxis;
namespace {

class FuseAttention : public Pass {
public:
  llvm::StringRef getName() const override { return "Fuse attention"; }
  llvm::StringRef getArgument() const override { return "fuse-attention"; }
  bool isEnabled(const PassContext &ctx) const override {
    return ctx.training.fuseAttention;
  }
  llvm::Expected<bool> run(ir::Graph &g, PassContext &ctx) override;
};

/// What one match rewrites.
struct Match {
  ir::Value *q = nullptr, *kt = nullptr, *v = nullptr;
  ir::Value *mask = nullptr, *bias = nullptr;
  bool maskKeeps = false; // Where(mask, S, fill): the mask marks what stays
  bool causal = false;
  double scale = 1, fill = 0, ratio = 0;
  ir::Node *product = nullptr; // MatMul(P, V), which becomes the Attention
  llvm::SmallVector<ir::Node *, 8> chain; // erased once the product is fused
};

bool isDefault(const ir::Node *n, llvm::StringRef op) {
  return n && n->domain.empty() && n->opType == op && !n->outputs.empty() &&
         n->outputs[0];
}

/// The node defining `v`, when v is read by nothing else and is no graph
/// output: a link inside the chain.
ir::Node *linkDef(const ir::Graph &g, const ir::Value *v) {
  return v && v->def && onlyUser(g, v) ? v->def : nullptr;
}

/// Whether `mask` reaches the scores' shape by numpy broadcasting.
bool broadcastsTo(llvm::ArrayRef<int64_t> from, llvm::ArrayRef<int64_t> to) {
  if (from.size() > to.size())
    return false;
  for (size_t k = 0; k < from.size(); ++k) {
    int64_t a = from[from.size() - 1 - k], b = to[to.size() - 1 - k];
    if (a != 1 && a != b)
      return false;
  }
  return true;
}

/// A Cast to the type it reads: the exporter's `.to(dtype)` of a tensor
/// already of that dtype.
bool isNoOpCast(const ir::Node *n) {
  return isDefault(n, "Cast") && n->inputs.size() == 1 && n->inputs[0] &&
         n->inputs[0]->dtype == n->outputs[0]->dtype;
}

/// The bool Constant's bytes when `mask` is one whose last two axes are
/// [t, t].
const std::vector<uint8_t> *squareConstantMask(const ir::Value *mask, int64_t t) {
  const ir::Node *d = mask->def;
  size_t r = mask->shape.size();
  if (!isDefault(d, "Constant") || mask->dtype != DType::Bool || r < 2 ||
      mask->shape[r - 1] != t || mask->shape[r - 2] != t)
    return nullptr;
  const Attribute *a = d->attrs.find("value");
  if (!a || a->kind != AttrKind::Tensor || a->tensor.dtype != DType::Bool ||
      static_cast<int64_t>(a->tensor.bytes.size()) != mask->numElements())
    return nullptr;
  return &a->tensor.bytes;
}

/// Whether `mask` marks exactly the causal triangle of each [t, t] matrix:
/// the entries above the diagonal when it marks what is masked, those on
/// and below it when it marks what stays.
bool isCausalMask(const ir::Value *mask, int64_t t, bool marksKept) {
  const std::vector<uint8_t> *bytes = squareConstantMask(mask, t);
  if (!bytes)
    return false;
  for (size_t k = 0; k < bytes->size(); ++k) {
    int64_t i = static_cast<int64_t>(k) / t % t, j = static_cast<int64_t>(k) % t;
    bool masked = (*bytes)[k] ? !marksKept : marksKept;
    if (masked != (j > i))
      return false;
  }
  return true;
}

class Matcher {
public:
  Matcher(const ir::Graph &g) : g(g) {
    // Values computed from a float parameter: a bias among them may be
    // trained, and its gradient needs whole [Tq, Tk] matrices.
    for (const auto &v : g.values())
      if (v->role == ir::ValueRole::Parameter && isFloatDType(v->dtype))
        fromParameters.insert(v.get());
    for (const ir::Node *n : g.nodes())
      for (const ir::Value *in : n->inputs)
        if (in && fromParameters.count(in)) {
          for (const ir::Value *out : n->outputs)
            if (out)
              fromParameters.insert(out);
          break;
        }
  }

  llvm::Optional<Match> match(ir::Node &softmax) const;

private:
  bool matchScores(ir::Value *s, Match &m) const;
  bool matchProbabilities(ir::Value *p, Match &m) const;

  const ir::Graph &g;
  llvm::DenseSet<const ir::Value *> fromParameters;
};

/// Walks up from the Softmax's input to the Q Kt product, recording the
/// scale, mask and bias on the way. The order is the exporters': product,
/// scale, mask, bias, clamp.
bool Matcher::matchScores(ir::Value *s, Match &m) const {
  enum Stage { Clamp, Bias, Mask, Scale, Product } stage = Clamp;
  const llvm::ArrayRef<int64_t> scores = s->shape;
  for (;;) {
    ir::Node *d = linkDef(g, s);
    if (!d || !d->domain.empty() || d->outputs.size() != 1 ||
        d->outputs[0]->shape != scores || d->outputs[0]->dtype != s->dtype)
      return false;
    llvm::StringRef op = d->opType;
    if (stage <= Clamp && op == "Max" && d->inputs.size() == 2) {
      llvm::Optional<double> c = constantScalar(d->inputs[1]);
      if (!c || *c > -1e30)
        return false;
      stage = Bias;
      s = d->inputs[0];
    } else if (stage <= Bias && op == "Add" && d->inputs.size() == 2) {
      // The bias is the operand that is not the product's chain: the one
      // that does not have the scores' shape, or else the second.
      unsigned chainSide = d->inputs[0]->shape == scores ? 0 : 1;
      ir::Value *bias = d->inputs[1 - chainSide];
      if (!bias || bias->dtype != s->dtype || !broadcastsTo(bias->shape, scores))
        return false;
      size_t r = bias->shape.size();
      bool whole = r >= 2 && bias->shape[r - 1] == scores.back() &&
                   bias->shape[r - 2] == scores[scores.size() - 2];
      if (fromParameters.count(bias) && !whole)
        return false;
      m.bias = bias;
      stage = Mask;
      s = d->inputs[chainSide];
    } else if (stage <= Mask && op == "Where" && d->inputs.size() == 3) {
      ir::Value *mask = d->inputs[0];
      llvm::Optional<double> fillFirst = constantScalar(d->inputs[1]);
      llvm::Optional<double> fillSecond = constantScalar(d->inputs[2]);
      if (!mask || mask->dtype != DType::Bool || !broadcastsTo(mask->shape, scores) ||
          fillFirst.hasValue() == fillSecond.hasValue())
        return false;
      m.maskKeeps = fillSecond.hasValue();
      m.fill = m.maskKeeps ? *fillSecond : *fillFirst;
      m.mask = mask;
      stage = Scale;
      s = d->inputs[m.maskKeeps ? 1 : 2];
    } else if (stage <= Scale && (op == "Mul" || op == "Div") && d->inputs.size() == 2) {
      llvm::Optional<double> c = constantScalar(d->inputs[1]);
      if (!c && op == "Mul")
        c = constantScalar(d->inputs[0]);
      if (!c || *c == 0 || !std::isfinite(*c))
        return false;
      m.scale *= op == "Mul" ? *c : 1 / *c;
      stage = Product;
      s = constantScalar(d->inputs[1]) ? d->inputs[0] : d->inputs[1];
    } else if (op == "MatMul" && d->inputs.size() == 2) {
      m.q = d->inputs[0];
      m.kt = d->inputs[1];
      m.chain.push_back(d);
      return m.q && m.kt;
    } else {
      return false;
    }
    m.chain.push_back(d);
  }
}

/// Walks down from the Softmax's output to the product with V.
bool Matcher::matchProbabilities(ir::Value *p, Match &m) const {
  for (;;) {
    const ir::Node *user = onlyUser(g, p);
    if (!user)
      return false;
    ir::Node *n = const_cast<ir::Node *>(user);
    if (isNoOpCast(n)) {
      m.chain.push_back(n);
      p = n->outputs[0];
    } else if (isDefault(n, "Dropout") && n->inputs[0] == p) {
      // Its mask output must be unread: the fused node draws it inside.
      if (n->outputs.size() > 1 && n->outputs[1] && n->outputs[1]->hasUses())
        return false;
      auto mode = readDropoutMode(*n, g.opsetVersion);
      if (!mode) {
        llvm::consumeError(mode.takeError());
        return false;
      }
      if (mode->training && !(mode->ratio >= 0 && mode->ratio < 1))
        return false;
      m.ratio = mode->training ? mode->ratio : 0;
      m.chain.push_back(n);
      p = n->outputs[0];
    } else if (isDefault(n, "MatMul") && n->inputs.size() == 2 && n->inputs[0] == p &&
               n->outputs.size() == 1) {
      m.v = n->inputs[1];
      m.product = n;
      return m.v != nullptr;
    } else {
      return false;
    }
  }
}

llvm::Optional<Match> Matcher::match(ir::Node &softmax) const {
  if (!isDefault(&softmax, "Softmax") || softmax.inputs.size() != 1 ||
      !softmax.inputs[0] || softmax.outputs.size() != 1)
    return llvm::None;
  ir::Value *x = softmax.inputs[0];
  if (!softmaxOverLastAxis(softmax, g.opsetVersion, x->shape.size()) || x->shape.size() < 2)
    return llvm::None;
  Match m;
  // A no-op Cast before the Softmax (softmax(..., dtype=float32) of f32).
  ir::Value *s = x;
  ir::Node *cast = linkDef(g, s);
  if (isNoOpCast(cast)) {
    m.chain.push_back(cast);
    s = cast->inputs[0];
  }
  m.chain.push_back(&softmax);
  if (!matchScores(s, m) || !matchProbabilities(softmax.outputs[0], m))
    return llvm::None;

  // Shapes: Q [..., Tq, D], Kt [..., D, Tk], V [..., Tk, Dv], one set of
  // leading axes, a float type shared by all.
  const ir::Value *q = m.q, *kt = m.kt, *v = m.v;
  size_t r = q->shape.size();
  if (r < 2 || kt->shape.size() != r || v->shape.size() != r ||
      !isFloatDType(q->dtype) || kt->dtype != q->dtype || v->dtype != q->dtype ||
      x->dtype != q->dtype)
    return llvm::None;
  for (size_t k = 0; k + 2 < r; ++k)
    if (kt->shape[k] != q->shape[k] || v->shape[k] != q->shape[k])
      return llvm::None;
  int64_t tq = q->shape[r - 2], d = q->shape[r - 1], tk = kt->shape[r - 1];
  if (kt->shape[r - 2] != d || v->shape[r - 2] != tk || d > attention::kMaxHeadDim ||
      v->shape[r - 1] > attention::kMaxHeadDim || tq < 1 || tk < 1)
    return llvm::None;
  // A causal Constant mask becomes the attribute when the fill it gives
  // weighs exactly nothing (exp underflows to 0 for any row maximum a real
  // score reaches).
  if (m.mask && tq == tk && (std::isinf(m.fill) || m.fill <= -1e30) && m.fill < 0 &&
      isCausalMask(m.mask, tq, m.maskKeeps)) {
    m.causal = true;
    m.mask = nullptr;
  }
  return m;
}

} // namespace

llvm::Expected<bool> FuseAttention::run(ir::Graph &g, PassContext &) {
  llvm::SmallVector<Match, 16> matches;
  {
    Matcher matcher(g);
    for (ir::Node *n : g.nodes())
      if (llvm::Optional<Match> m = matcher.match(*n))
        matches.push_back(std::move(*m));
  }
  for (Match &m : matches) {
    ir::Node *product = m.product;
    ir::Value *mask = m.mask;
    if (mask && m.maskKeeps) {
      // The kernel's mask marks what is replaced.
      ir::Value *flipped = g.addValue(g.uniqueValueName(mask->name + ".masked"), DType::Bool,
                                      mask->shape, ir::ValueRole::Activation);
      g.insertNode(product, "Not", g.uniqueNodeName(product->name + ".mask"), {mask},
                   {flipped});
      mask = flipped;
    }
    ir::Value *y = product->outputs[0];
    llvm::SmallVector<int64_t, 6> rows(m.q->shape.begin(), m.q->shape.end() - 1);
    DType lseType = m.q->dtype == DType::F64 ? DType::F64 : DType::F32;
    ir::Value *lse = g.addValue(g.uniqueValueName(y->name + ".lse"), lseType, rows,
                                ir::ValueRole::Activation);
    AttributeList attrs;
    attrs.set(makeFloatAttr("scale", m.scale));
    if (m.causal)
      attrs.set(makeIntAttr("causal", 1));
    if (mask)
      attrs.set(makeFloatAttr("fill", m.fill));
    if (m.ratio > 0)
      attrs.set(makeFloatAttr("ratio", m.ratio));
    product->opType = "Attention";
    product->domain = "zinc";
    llvm::SmallVector<ir::Value *, 5> operands{m.q, m.kt, m.v, mask, m.bias};
    while (!operands.back())
      operands.pop_back();
    product->setInputs(operands);
    product->attrs = std::move(attrs);
    product->outputs.push_back(lse);
    lse->def = product;
    // Each link was read by the next alone; none is read once the product
    // no longer reads P.
    for (auto it = m.chain.rbegin(); it != m.chain.rend(); ++it)
      g.eraseNode(*it);
  }
  if (!matches.empty())
    g.eraseDeadValues();
  return !matches.empty();
}

std::unique_ptr<Pass> createFuseAttentionPass() {
  return std::make_unique<FuseAttention>();
}

} // namespace zinc::passes
