//===- Tile.cpp - tile: memory-centric tiling of operators too big to fit -===//
//
// ZeRO-Infinity's TiledLinear, chosen by the compiler. An operator whose
// weight, with its gradient and the prefetch of what comes next, does not
// fit the GPU beside its activations (a vocabulary projection, a 64K-wide
// layer) becomes K operators, each with a share of the weight along its
// output dimension:
//   MatMul(X, W[K,N])            -> MatMul(X, W_i[K,n_i]),   axis 1 of W
//   Gemm(A, B, C) (transB or not) -> Gemm(A, B_i, C_i),        rows or columns of B
//   Conv(X, W[M,C,...], B)        -> Conv(X, W_i[m_i,C,...], B_i), output channels
//   Gather(W[V,D], ids)           -> Gather(W_i[V,d_i], ids),   embedding columns
// and a Concat along the output's tiled axis puts the result together.
// A MatMul whose only reader adds a bias vector (nn.Linear as exported)
// takes its share of the bias too.
//
// The pass runs before build-training, so autodiff derives each tile's
// backward from its forward: every tile's weight gradient is its own, the
// input gradient sums the tiles' contributions, and the output gradient is
// split (a strided view after fold-transposes, no copy). Each W_i is a
// parameter of its own (an InitializerRef slice of the original), so plan-memory,
// insert-transfers and the optimizer handle one tile at a time: the next
// tile's prefetch overlaps this tile's compute, and only a tile is ever on
// the GPU. concat-in-place later makes each tile write its columns of the
// output directly.
//
// K: --tile=auto tiles an operator whose working set (its weight, the
// next weight's prefetch, its weight gradient, and its activations with
// their gradients) takes more than its share of the GPU (half, the other
// half being for what else is live; less when zinc-compile retries after
// the GPU overflowed: MemoryOptions::budgetDivisor), into the smallest K
// whose working set with one tile's weight fits that share (the whole GPU
// when the share cannot hold even one column). --tile=N gives N tiles to every tileable operator (a weight
// of its own) with at least N outputs along the tiled axis; --tile=none
// tiles nothing.
//
//===----------------------------------------------------------------------===//
#include "zinc/passes/Pass.h"
#include "zinc/support/Error.h"
#include "llvm/Support/MathExtras.h"

namespace zinc::passes {
namespace {

class Tile : public Pass {
public:
  llvm::StringRef getName() const override { return "Memory-Centric Tiling"; }
  llvm::StringRef getArgument() const override { return "tile"; }
  llvm::Expected<bool> run(ir::Graph &g, PassContext &ctx) override;
  bool isEnabled(const PassContext &ctx) const override {
    return ctx.memory.tileMode != TileMode::None;
  }
};

/// An operator the pass can split, and how.
struct Candidate {
  ir::Node *node = nullptr;
  ir::Value *weight = nullptr;
  /// The weight's axis that is the output's tiled axis.
  int64_t weightAxis = 0;
  /// A bias split with the weight (a Parameter along the output axis), or
  /// null; `biasAxis` is its axis.
  ir::Value *bias = nullptr;
  int64_t biasAxis = 0;
  /// MatMul's bias: the Add that reads the product, or null.
  ir::Node *biasAdd = nullptr;
  /// MatMul's weight read through Transpose(W) (nn.Linear exported without
  /// constant folding): the Transpose, each tile getting its own; null
  /// otherwise.
  ir::Node *transpose = nullptr;
  /// The output's tiled axis and its extent.
  int64_t outAxis = 0;
  int64_t outDim = 0;
};

/// Where the weight is among the node's inputs.
unsigned weightOperand(const ir::Node &n) { return n.opType == "Gather" ? 0 : 1; }

/// A parameter read by this node alone (a tied weight stays whole).
bool isOwnParameter(const ir::Value *v) {
  return v && v->role == ir::ValueRole::Parameter && v->init &&
         isFloatDType(v->dtype) && v->uses().size() == 1 &&
         (!v->init->isSlice());
}

/// A Parameter vector along the tiled axis that only this node reads.
bool isSplittableBias(const ir::Value *c, int64_t n, int64_t &axis) {
  if (!isOwnParameter(c))
    return false;
  if (c->shape.size() == 1 && c->shape[0] == n) {
    axis = 0;
    return true;
  }
  if (c->shape.size() == 2 && c->shape[0] == 1 && c->shape[1] == n) {
    axis = 1;
    return true;
  }
  return false;
}

llvm::Optional<Candidate> tileableOp(const ir::Graph &g, ir::Node *n) {
  if (!n->domain.empty() || n->outputs.size() != 1 || !n->outputs[0])
    return llvm::None;
  ir::Value *y = n->outputs[0];
  Candidate c;
  c.node = n;
  if (n->opType == "MatMul" && n->inputs.size() == 2) {
    ir::Value *w = n->inputs[1];
    if (!w || !n->inputs[0] || y->shape.empty())
      return llvm::None;
    c.weightAxis = 1;
    // MatMul(x, Transpose(W)): W's rows are the output's columns.
    if (ir::Node *t = w->def; t && t->domain.empty() && t->opType == "Transpose" &&
                              w->uses().size() == 1 && !g.isOutput(w) &&
                              t->inputs.size() == 1 && w->shape.size() == 2 &&
                              t->attrs.getInts("perm") == llvm::ArrayRef<int64_t>({1, 0})) {
      c.transpose = t;
      w = t->inputs[0];
      c.weightAxis = 0;
    }
    if (!isOwnParameter(w) || w->shape.size() != 2)
      return llvm::None;
    c.weight = w;
    c.outAxis = static_cast<int64_t>(y->shape.size()) - 1;
    c.outDim = w->shape[c.weightAxis];
    // nn.Linear: Add(MatMul(x, W^T), b).
    if (y->uses().size() == 1 && !g.isOutput(y)) {
      ir::Node *add = y->uses()[0].user;
      if (add->domain.empty() && add->opType == "Add" &&
          add->inputs.size() == 2 && add->outputs.size() == 1 &&
          add->outputs[0] && add->outputs[0]->shape == y->shape) {
        ir::Value *b = add->inputs[add->inputs[0] == y ? 1 : 0];
        int64_t axis = 0;
        if (b != y && b->shape.size() == 1 && b->dtype == y->dtype &&
            isSplittableBias(b, c.outDim, axis)) {
          c.bias = b;
          c.biasAxis = axis;
          c.biasAdd = add;
        }
      }
    }
    return c;
  }
  if (n->opType == "Gemm" && n->inputs.size() >= 2) {
    ir::Value *w = n->inputs[1];
    if (!isOwnParameter(w) || w->shape.size() != 2 || !n->inputs[0])
      return llvm::None;
    bool transB = n->attrs.getInt("transB", 0) != 0;
    c.weight = w;
    c.weightAxis = transB ? 0 : 1;
    c.outAxis = 1;
    c.outDim = w->shape[c.weightAxis];
    if (n->inputs.size() > 2 && n->inputs[2]) {
      ir::Value *cv = n->inputs[2];
      int64_t axis = 0;
      if (isSplittableBias(cv, c.outDim, axis)) {
        c.bias = cv;
        c.biasAxis = axis;
      } else if (cv->shape.empty() || cv->shape.back() != c.outDim) {
        // Broadcast along the output's columns: every tile reads it whole.
      } else {
        return llvm::None;
      }
    }
    return c;
  }
  // An embedding lookup, Gather(W[V,D], ids) along axis 0: each tile is
  // every row's share of D columns (the lookup itself cannot be split by
  // rows: any id may come).
  if (n->opType == "Gather" && n->inputs.size() == 2) {
    ir::Value *w = n->inputs[0];
    if (!isOwnParameter(w) || w->shape.size() != 2 || !n->inputs[1] ||
        n->attrs.getInt("axis", 0) != 0 || y->shape.empty())
      return llvm::None;
    c.weight = w;
    c.weightAxis = 1;
    c.outAxis = static_cast<int64_t>(y->shape.size()) - 1;
    c.outDim = w->shape[1];
    return c;
  }
  if (n->opType == "Conv" && n->inputs.size() >= 2) {
    ir::Value *w = n->inputs[1];
    if (!isOwnParameter(w) || w->shape.size() < 3 || !n->inputs[0] ||
        n->attrs.getInt("group", 1) != 1)
      return llvm::None;
    c.weight = w;
    c.weightAxis = 0;
    c.outAxis = 1;
    c.outDim = w->shape[0];
    if (n->inputs.size() > 2 && n->inputs[2]) {
      int64_t axis = 0;
      if (!isSplittableBias(n->inputs[2], c.outDim, axis) || axis != 0)
        return llvm::None;
      c.bias = n->inputs[2];
      c.biasAxis = 0;
    }
    return c;
  }
  return llvm::None;
}

/// `n` as a candidate, unless its output axis is empty.
llvm::Optional<Candidate> tileable(const ir::Graph &g, ir::Node *n) {
  llvm::Optional<Candidate> c = tileableOp(g, n);
  // An empty output axis has nothing to split.
  if (c && c->outDim <= 0)
    return llvm::None;
  return c;
}

/// The bytes one element of a weight takes during compute.
uint64_t computeElementBytes(const PassContext &ctx, const ir::Value &w) {
  return ctx.training.precision == PrecisionKind::FP32 ? dtypeSize(w.dtype) : 2;
}

/// Bytes of the operator's activations: its data input and output, and in
/// training their gradients too.
uint64_t activationBytes(const PassContext &ctx, const Candidate &c) {
  const ir::Value *data = c.node->inputs[weightOperand(*c.node) == 0 ? 1 : 0];
  uint64_t bytes = data->byteSize() + c.node->outputs[0]->byteSize();
  return ctx.training.mode == CompileMode::Train ? 2 * bytes : bytes;
}

/// How many of a tile's weights are live at once: the tile computing, the
/// next one arriving, and (training) the tile's gradient.
unsigned tileCopiesLive(const PassContext &ctx) {
  return ctx.training.mode == CompileMode::Train ? 3 : 2;
}

/// Tiles of a whole number of these many columns keep rows aligned for
/// the vector units and BLAS.
constexpr uint64_t kColumnQuantum = 16;

/// Bytes a tile of `columns` output columns keeps on the GPU (its weight,
/// the next one's prefetch, its gradient, the operator's activations).
uint64_t tileWorkingSet(const PassContext &ctx, const Candidate &c, uint64_t columns) {
  uint64_t bytesPerColumn = (c.weight->numElements() / c.outDim + (c.bias ? 1 : 0)) *
                            computeElementBytes(ctx, *c.weight) * tileCopiesLive(ctx);
  return columns * bytesPerColumn + activationBytes(ctx, c);
}

/// The tile width (columns per tile) --tile=auto gives `c`: its whole
/// output extent when it fits whole; 0 when not even one column does.
uint64_t autoTileWidth(const PassContext &ctx, const Candidate &c, uint64_t &tileNeed) {
  uint64_t capacity = ctx.memory.gpuCapacity;
  uint64_t acts = activationBytes(ctx, c);
  uint64_t bytesPerColumn = tileWorkingSet(ctx, c, 1) - acts;
  tileNeed = bytesPerColumn + acts;
  uint64_t whole = static_cast<uint64_t>(c.outDim);
  if (!capacity)
    return whole;
  auto columnsWithin = [&](uint64_t budget) -> uint64_t {
    return budget > acts ? (budget - acts) / bytesPerColumn : 0;
  };
  uint64_t share = capacity / ctx.memory.budgetDivisor;
  // Whole, it leaves the rest of the GPU to the rest: left alone.
  if (columnsWithin(share) >= whole)
    return whole;
  for (uint64_t budget : {share, capacity}) {
    uint64_t columns = columnsWithin(budget);
    if (!columns)
      continue;
    if (columns >= kColumnQuantum)
      columns = columns / kColumnQuantum * kColumnQuantum;
    // As many tiles as the widest that fit need, made as even as the
    // quantum lets them (never wider than what fits).
    uint64_t tiles = llvm::divideCeil(whole, columns);
    uint64_t even = llvm::divideCeil(whole, tiles);
    return columns >= kColumnQuantum ? llvm::alignTo(even, kColumnQuantum) : even;
  }
  return 0;
}

/// `ref` narrowed to [begin, begin + extent) along `axis` of `whole`.
ir::InitializerRef shareOf(const ir::InitializerRef &ref,
                           llvm::ArrayRef<int64_t> whole, int64_t axis,
                           int64_t begin) {
  ir::InitializerRef share = ref;
  share.wholeShape.assign(whole.begin(), whole.end());
  share.sliceAxis = axis;
  share.sliceBegin = begin;
  return share;
}

/// A new parameter: `v`'s share [begin, begin + extent) along `axis`.
ir::Value *tileOf(ir::Graph &g, ir::Value *v, int64_t axis, int64_t begin,
                  int64_t extent, unsigned index) {
  llvm::SmallVector<int64_t, 4> shape(v->shape.begin(), v->shape.end());
  shape[axis] = extent;
  ir::Value *t = g.addValue(g.uniqueValueName(v->name + ".tile" + std::to_string(index)),
                            v->dtype, shape, ir::ValueRole::Parameter);
  t->init = shareOf(*v->init, v->shape, axis, begin);
  return t;
}

/// Splits `c` into tiles `width` columns wide (the last one narrower when
/// they do not divide), joined by a Concat that takes over its result.
void split(ir::Graph &g, const Candidate &c, int64_t width) {
  unsigned k = static_cast<unsigned>(llvm::divideCeil(c.outDim, width));
  ir::Node *n = c.node;
  ir::Node *last = c.biasAdd ? c.biasAdd : n;
  ir::Value *result = last->outputs[0];
  // The tiles and the Concat go where the result is produced, so every
  // reader still follows; the weight and the data input exist there too.
  ir::Node *at = g.nextNode(last);
  llvm::SmallVector<ir::Value *, 8> parts;
  int64_t begin = 0;
  for (unsigned i = 0; i < k; ++i) {
    int64_t extent = std::min(width, c.outDim - begin);
    ir::Value *w = tileOf(g, c.weight, c.weightAxis, begin, extent, i);
    ir::Value *b = c.bias ? tileOf(g, c.bias, c.biasAxis, begin, extent, i) : nullptr;
    llvm::SmallVector<ir::Value *, 4> inputs(n->inputs.begin(), n->inputs.end());
    inputs[weightOperand(*n)] = w;
    if (c.transpose) {
      ir::Value *t = c.transpose->outputs[0];
      ir::Value *wt = g.addValue(g.uniqueValueName(t->name + ".tile" + std::to_string(i)),
                                 w->dtype, {w->shape[1], w->shape[0]},
                                 ir::ValueRole::Activation);
      g.insertNode(at, "Transpose",
                   g.uniqueNodeName(c.transpose->name + "/tile" + std::to_string(i)),
                   {w}, {wt}, c.transpose->attrs);
      inputs[1] = wt;
    }
    if (b && !c.biasAdd)
      inputs[2] = b;
    ir::Value *y = n->outputs[0];
    llvm::SmallVector<int64_t, 6> shape(y->shape.begin(), y->shape.end());
    shape[c.outAxis] = extent;
    std::string base = n->name + "/tile" + std::to_string(i);
    ir::Value *part = g.addValue(g.uniqueValueName(y->name + ".tile" + std::to_string(i)),
                                 y->dtype, shape, ir::ValueRole::Activation);
    g.insertNode(at, n->opType, g.uniqueNodeName(base), inputs, {part}, n->attrs,
                 n->domain);
    if (c.biasAdd) {
      ir::Value *sum = g.addValue(g.uniqueValueName(result->name + ".tile" + std::to_string(i)),
                                  result->dtype, shape, ir::ValueRole::Activation);
      g.insertNode(at, "Add", g.uniqueNodeName(base + "/bias"), {part, b}, {sum});
      part = sum;
    }
    parts.push_back(part);
    begin += extent;
  }
  // The originals go; their result is the Concat's.
  std::string concatName = g.uniqueNodeName(n->name + "/tiles");
  if (c.biasAdd)
    g.eraseNode(c.biasAdd);
  g.eraseNode(n);
  if (c.transpose)
    g.eraseNode(c.transpose);
  AttributeList attrs;
  attrs.set(makeIntAttr("axis", c.outAxis));
  g.insertNode(at, "Concat", concatName, parts, {result}, std::move(attrs));
}

} // namespace

llvm::Expected<bool> Tile::run(ir::Graph &g, PassContext &ctx) {
  MemoryOptions &memory = ctx.memory;
  memory.tiled.clear();
  memory.untileable.clear();
  if (memory.tileMode == TileMode::None)
    return false;
  // --optimizer=none makes each gradient an output named after its
  // initializer; a tiled one would have no whole gradient to give.
  if (ctx.training.mode == CompileMode::Train &&
      ctx.training.optimizer == OptimizerKind::None)
    return false;
  std::vector<Candidate> chosen;
  std::vector<int64_t> widths;
  for (ir::Node *n : g.nodes()) {
    llvm::Optional<Candidate> c = tileable(g, n);
    if (!c)
      continue;
    uint64_t width = c->outDim;
    if (memory.tileMode == TileMode::Fixed) {
      if (c->outDim >= memory.tileCount)
        width = llvm::divideCeil(c->outDim, memory.tileCount);
    } else {
      uint64_t tileNeed = 0;
      width = autoTileWidth(ctx, *c, tileNeed);
      if (width == 0) {
        // Left whole: allocate will say what capacity the plan needs, and
        // add this.
        if (memory.untileable.empty())
          memory.untileable =
              (n->describe() + " cannot be tiled to fit: one tile of a single output column "
               "of its weight '" + c->weight->name + "' (" + dtypeName(c->weight->dtype) +
               formatShape(c->weight->shape) + ") needs " + llvm::Twine(tileNeed) +
               " bytes of GPU memory with the operator's activations")
                  .str();
        continue;
      }
    }
    if (width >= static_cast<uint64_t>(c->outDim))
      continue;
    chosen.push_back(*c);
    widths.push_back(static_cast<int64_t>(width));
  }
  for (size_t i = 0; i < chosen.size(); ++i) {
    const Candidate &c = chosen[i];
    TiledNode t;
    t.node = c.node->name;
    t.op = c.node->opType;
    t.tiles = static_cast<unsigned>(llvm::divideCeil(c.outDim, widths[i]));
    t.wholeWorkingSet = tileWorkingSet(ctx, c, c.outDim);
    t.tileWorkingSet = tileWorkingSet(ctx, c, widths[i]);
    t.budget = memory.gpuCapacity / memory.budgetDivisor;
    t.reason = memory.tileMode == TileMode::Fixed
                   ? "--tile=" + std::to_string(memory.tileCount)
                   : "its working set whole exceeds its share of the GPU tier (1/" +
                         std::to_string(memory.budgetDivisor) + "); tiles " +
                         std::to_string(widths[i]) + " wide fit it";
    memory.tiled.push_back(std::move(t));
    split(g, c, widths[i]);
  }
  if (!chosen.empty()) {
    g.eraseDeadValues();
    if (ctx.note && memory.tileMode == TileMode::Auto)
      ctx.note("tiled " + llvm::Twine(chosen.size()) +
               " operator(s) too big for the GPU tier beside their neighbours");
  }
  return !chosen.empty();
}

std::unique_ptr<Pass> createTilePass() { return std::make_unique<Tile>(); }

} // namespace zinc::passes
