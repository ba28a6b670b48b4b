//===- ActivationCheckpointing.cpp - checkpoint: recompute, not keep ------===//
//
// Backward reads what forward computed: every such value (a "saved"
// activation) is live from its forward node until its backward reader, so
// at the turn from forward to backward the step holds all of them. For a
// deep model that is far more than the GPU (96 layers of GPT-3 175B at
// 2048 tokens: hundreds of GiB). Chen et al.'s activation checkpointing
// keeps only some forward values, the checkpoints, and recomputes the rest
// in backward from them, one segment at a time.
//
// Segments. The forward nodes (those the loss depends on), in program
// order, have narrow points: positions where a single computed value
// carries everything forward (a residual stream between layers, between
// attention and MLP). Values every step has anyway (graph inputs,
// initializers, states, constants and shapes computed from them) do not
// count. The narrow points cut forward into segments; a segment needs only
// its checkpoint (the value at the narrow point before it) to be computed
// again.
//
// Choice. --activation-checkpointing=every-layer recomputes every segment.
// auto (the default) does nothing while the saved activations fit in half
// the GPU tier (the other half being for weights, their prefetches and
// backward's own values; less when zinc-compile retries after the GPU
// overflowed); otherwise it recomputes segments, those that
// free the most bytes per FLOP first, until what is kept fits that half or
// every segment is recomputed. What is still kept and does not fit (the
// checkpoints themselves) the spill pass moves to the CPU between their
// forward and backward uses, and fetches back ahead of their segment's
// backward. none never recomputes.
//
// Rewrite. A recomputed segment's saved values are computed again by
// copies of the forward nodes that make them (with the same attributes:
// Dropout's mask comes from the counter-based generator keyed by the
// node's seed_id and the step, so the copy draws the same mask; every
// kernel is deterministic, so recomputed values are bit-identical), placed
// just before the first backward node that reads any of them; backward
// reads the copies, and the originals die at their last forward use.
//
//===----------------------------------------------------------------------===//
#include "zinc/passes/LossOutput.h"
#include "zinc/passes/NodeFlops.h"
#include "zinc/passes/Pass.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

namespace zinc::passes {
namespace {

class ActivationCheckpointing : public Pass {
public:
  llvm::StringRef getName() const override { return "Activation Checkpointing"; }
  llvm::StringRef getArgument() const override { return "checkpoint"; }
  llvm::Expected<bool> run(ir::Graph &g, PassContext &ctx) override;
  bool isEnabled(const PassContext &ctx) const override {
    // With none it still measures what backward keeps, for the report.
    return ctx.training.mode == CompileMode::Train;
  }
};

/// One stretch of forward between narrow points.
struct Segment {
  /// Forward positions [first, last]; `last` makes the segment's end value.
  size_t first = 0, last = 0;
  /// The value the segment starts from (null for the first segment) and
  /// the one it ends with (null for the last).
  ir::Value *checkpoint = nullptr, *end = nullptr;
  /// Values it computes that backward reads, but not its end value (the
  /// next segment's checkpoint, kept).
  std::vector<ir::Value *> saved;
  uint64_t savedBytes = 0;
  /// Nodes (forward positions, ascending) a recompute runs, and their FLOPs.
  std::vector<size_t> recompute;
  uint64_t recomputeFlops = 0;
};

/// The forward pass of a training graph, analysed.
class Forward {
public:
  Forward(ir::Graph &g, ir::Value *loss) {
    // Forward: the loss and everything it depends on, including the nodes
    // that write a forward value in place after its definition (the tiles
    // concat-in-place makes write their share of a product: they have no
    // outputs, so no value names them as its definition).
    llvm::DenseSet<const ir::Node *> inForward;
    std::vector<const ir::Node *> work;
    if (loss->def) {
      inForward.insert(loss->def);
      work.push_back(loss->def);
    }
    auto visit = [&](const ir::Node *n) {
      if (n && inForward.insert(n).second)
        work.push_back(n);
    };
    while (!work.empty()) {
      const ir::Node *n = work.back();
      work.pop_back();
      for (const ir::Value *in : n->inputs) {
        if (!in || !in->def)
          continue;
        visit(in->def);
        for (const ir::Use &u : in->uses())
          if (u.user->writesInput(u.operand))
            visit(u.user);
      }
    }
    for (ir::Node *n : g.nodes())
      if (inForward.count(n)) {
        position[n] = nodes.size();
        nodes.push_back(n);
      }
    // Constants computed in the step (Constant nodes, shapes and masks made
    // from them): as good as an initializer, whatever the program order.
    auto constant = [&](const ir::Value *v) {
      return !v || (v->def ? freeValues.count(v) > 0 : v->role == ir::ValueRole::Constant);
    };
    for (ir::Node *n : nodes)
      if (llvm::all_of(n->inputs, constant) && !n->effects().updatesInPlace())
        for (ir::Value *out : n->outputs)
          if (out)
            freeValues.insert(out);
  }

  /// Whether a step has `v` without computing forward: graph inputs,
  /// initializers, states and constants.
  bool isFree(const ir::Value *v) const { return !v || !v->def || freeValues.count(v); }
  bool isForward(const ir::Node *n) const { return position.count(n); }
  size_t size() const { return nodes.size(); }
  ir::Node *at(size_t i) const { return nodes[i]; }
  size_t positionOf(const ir::Node *n) const { return position.lookup(n); }

  /// Positions after which exactly one computed value crosses to later
  /// forward nodes, and that value is made there: the narrow points.
  std::vector<std::pair<size_t, ir::Value *>> narrowPoints() const {
    std::vector<int64_t> delta(nodes.size() + 1, 0);
    // The crossing value each position makes, and how many it makes.
    std::vector<ir::Value *> made(nodes.size(), nullptr);
    std::vector<unsigned> madeCount(nodes.size(), 0);
    for (size_t p = 0; p < nodes.size(); ++p)
      for (ir::Value *out : nodes[p]->outputs) {
        if (!out || isFree(out))
          continue;
        size_t lastUse = p;
        for (const ir::Use &u : out->uses())
          if (isForward(u.user))
            lastUse = std::max(lastUse, positionOf(u.user));
        if (lastUse == p)
          continue;
        // Crosses every position in [p, lastUse).
        delta[p] += 1;
        delta[lastUse] -= 1;
        made[p] = out;
        ++madeCount[p];
      }
    std::vector<std::pair<size_t, ir::Value *>> points;
    int64_t crossing = 0;
    for (size_t p = 0; p + 1 < nodes.size(); ++p) {
      crossing += delta[p];

      if (crossing == 1 && madeCount[p] == 1)
        points.push_back({p, made[p]});
    }
    return points;
  }

private:
  std::vector<ir::Node *> nodes;
  llvm::DenseMap<const ir::Node *, size_t> position;
  llvm::DenseSet<const ir::Value *> freeValues;
};

/// Whether backward (any node outside forward) reads `v`.
bool readByBackward(const Forward &fwd, const ir::Value &v) {
  return llvm::any_of(v.uses(), [&](const ir::Use &u) { return !fwd.isForward(u.user); });
}

/// The segments between narrow points, with what each saves and what a
/// recompute of it would run.
std::vector<Segment> segments(const ir::Graph &g, const Forward &fwd) {
  std::vector<Segment> out;
  auto points = fwd.narrowPoints();
  size_t first = 0;
  ir::Value *checkpoint = nullptr;
  for (size_t i = 0; i <= points.size(); ++i) {
    Segment s;
    s.first = first;
    s.last = i < points.size() ? points[i].first : fwd.size() - 1;
    s.checkpoint = checkpoint;
    s.end = i < points.size() ? points[i].second : nullptr;
    llvm::DenseSet<size_t> needed;
    for (size_t p = s.first; p <= s.last; ++p)
      for (ir::Value *v : fwd.at(p)->outputs)
        if (v && v != s.end && !fwd.isFree(v) && !g.isOutput(v) &&
            readByBackward(fwd, *v)) {
          s.saved.push_back(v);
          s.savedBytes += v->byteSize();
        }
    // The nodes that make the saved values, back to the checkpoint, and
    // every forward node that writes one of those values in place.
    std::vector<const ir::Value *> work(s.saved.begin(), s.saved.end());
    llvm::DenseSet<const ir::Value *> seen(work.begin(), work.end());
    while (!work.empty()) {
      const ir::Value *v = work.back();
      work.pop_back();
      llvm::SmallVector<const ir::Node *, 4> makers;
      if (v->def)
        makers.push_back(v->def);
      for (const ir::Use &u : v->uses())
        if (fwd.isForward(u.user) && u.user->writesInput(u.operand))
          makers.push_back(u.user);
      for (const ir::Node *n : makers) {
        if (!fwd.isForward(n) || !needed.insert(fwd.positionOf(n)).second)
          continue;
        for (const ir::Value *in : n->inputs)
          if (in && !fwd.isFree(in) && in != s.checkpoint && seen.insert(in).second)
            work.push_back(in);
      }
    }
    s.recompute.assign(needed.begin(), needed.end());
    llvm::sort(s.recompute);
    for (size_t p : s.recompute)
      s.recomputeFlops += estimateFlops(*fwd.at(p));
    out.push_back(std::move(s));
    first = s.last + 1;
    checkpoint = out.back().end;
  }
  return out;
}

/// Program positions of the nodes as they were before any rewrite.
using ProgramOrder = llvm::DenseMap<const ir::Node *, size_t>;

/// Whether `u` is a reader the recompute serves: outside forward and after
/// the segment (a reader within it keeps the original).
bool servedByRecompute(const Forward &fwd, const ProgramOrder &order, const Segment &s,
                       const ir::Node *u) {
  return !fwd.isForward(u) && order.lookup(u) > order.lookup(fwd.at(s.last));
}

/// Recomputes `s`: copies of its recompute nodes before the first
/// backward reader of its saved values, which read the copies from then on.
void recompute(ir::Graph &g, const Forward &fwd, const ProgramOrder &order,
               const Segment &s) {
  ir::Node *at = nullptr;
  for (ir::Value *v : s.saved)
    for (const ir::Use &u : v->uses())
      if (servedByRecompute(fwd, order, s, u.user) &&
          (!at || order.lookup(u.user) < order.lookup(at)))
        at = u.user;
  if (!at)
    return;
  llvm::DenseMap<const ir::Value *, ir::Value *> copyOf;
  for (size_t p : s.recompute) {
    ir::Node *n = fwd.at(p);
    llvm::SmallVector<ir::Value *, 4> inputs;
    for (ir::Value *in : n->inputs)
      inputs.push_back(in && copyOf.count(in) ? copyOf[in] : in);
    llvm::SmallVector<ir::Value *, 2> outputs;
    for (ir::Value *out : n->outputs) {
      if (!out) {
        outputs.push_back(nullptr);
        continue;
      }
      ir::Value *again = g.addValue(g.uniqueValueName(out->name + "@recompute"), out->dtype,
                                    out->shape, ir::ValueRole::Activation);
      copyOf[out] = again;
      outputs.push_back(again);
    }
    g.insertNode(at, n->opType, g.uniqueNodeName(n->name + "@recompute"), inputs, outputs,
                 n->attrs, n->domain);
  }
  for (ir::Value *v : s.saved) {
    ir::Value *again = copyOf.lookup(v);
    if (!again)
      continue;
    llvm::SmallVector<ir::Node *, 4> users;
    for (const ir::Use &u : v->uses())
      if (servedByRecompute(fwd, order, s, u.user) && !llvm::is_contained(users, u.user))
        users.push_back(u.user);
    for (ir::Node *u : users)
      u->replaceUsesOfWith(v, again);
  }
}

} // namespace

llvm::Expected<bool> ActivationCheckpointing::run(ir::Graph &g, PassContext &ctx) {
  MemoryOptions &memory = ctx.memory;
  memory.checkpointing = CheckpointSummary{};
  auto loss = findLossOutput(g, ctx.training.loss);
  if (!loss) {
    llvm::consumeError(loss.takeError());
    return false;
  }
  Forward fwd(g, *loss);
  if (fwd.size() < 2)
    return false;
  std::vector<Segment> segs = segments(g, fwd);
  CheckpointSummary &summary = memory.checkpointing;
  for (const Segment &s : segs) {
    summary.savedBytesBefore += s.savedBytes;
    if (s.end && readByBackward(fwd, *s.end) && !g.isOutput(s.end))
      summary.savedBytesBefore += s.end->byteSize();
  }
  summary.savedBytesAfter = summary.savedBytesBefore;

  // Which segments to recompute.
  std::vector<size_t> chosen;
  uint64_t budget = memory.gpuCapacity / memory.budgetDivisor;
  std::string share = "their share of the GPU tier (1/" + std::to_string(memory.budgetDivisor) + ")";
  summary.budgetBytes = budget;
  // The last segment's saved values are read as soon as backward starts:
  // recomputing them frees nothing.
  auto worthIt = [&](const Segment &s) { return s.end && !s.saved.empty(); };
  if (memory.checkpointMode == CheckpointMode::None) {
    summary.reason = "--activation-checkpointing=none";
    return false;
  } else if (memory.checkpointMode == CheckpointMode::EveryLayer) {
    summary.reason = "--activation-checkpointing=every-layer";
    for (size_t i = 0; i < segs.size(); ++i)
      if (worthIt(segs[i]))
        chosen.push_back(i);
  } else if (!memory.gpuCapacity || summary.savedBytesBefore <= budget) {
    summary.reason = "the activations kept for backward fit " + share;
  } else {
    summary.reason = "the activations kept for backward exceed " + share +
                     "; the segments recomputed free the most bytes per FLOP";
    std::vector<size_t> order;
    for (size_t i = 0; i < segs.size(); ++i)
      if (worthIt(segs[i]))
        order.push_back(i);
    // Most bytes freed per FLOP of recompute first.
    llvm::stable_sort(order, [&](size_t a, size_t b) {
      return static_cast<double>(segs[a].savedBytes) / (segs[a].recomputeFlops + 1) >
             static_cast<double>(segs[b].savedBytes) / (segs[b].recomputeFlops + 1);
    });
    uint64_t kept = summary.savedBytesBefore;
    for (size_t i : order) {
      if (kept <= budget)
        break;
      chosen.push_back(i);
      kept -= segs[i].savedBytes;
      // A recomputed segment needs its checkpoint kept for backward.
      if (segs[i].checkpoint && !readByBackward(fwd, *segs[i].checkpoint))
        kept += segs[i].checkpoint->byteSize();
    }
  }
  if (chosen.empty())
    return false;
  llvm::sort(chosen);
  llvm::DenseSet<const ir::Value *> checkpoints;
  for (size_t i : chosen) {
    const Segment &s = segs[i];
    summary.savedBytesAfter -= s.savedBytes;
    ++summary.recomputedSegments;
    summary.recomputedNodes += s.recompute.size();
    summary.recomputeFlops += s.recomputeFlops;
    if (s.checkpoint && checkpoints.insert(s.checkpoint).second) {
      summary.checkpoints.push_back(s.checkpoint->name);
      summary.checkpointBytes += s.checkpoint->byteSize();
      if (!readByBackward(fwd, *s.checkpoint))
        summary.savedBytesAfter += s.checkpoint->byteSize();
    }
  }
  ProgramOrder order;
  for (const ir::Node *n : g.nodes())
    order[n] = order.size();
  for (size_t i : chosen)
    recompute(g, fwd, order, segs[i]);
  if (ctx.note)
    ctx.note("activation checkpointing: " + llvm::Twine(summary.recomputedSegments) +
             " segment(s) recomputed in backward (" + llvm::Twine(summary.recomputedNodes) +
             " nodes, " + llvm::Twine(summary.recomputeFlops) + " FLOPs per step) from " +
             llvm::Twine(summary.checkpoints.size()) + " checkpoint(s); activations kept for "
             "backward: " + llvm::Twine(summary.savedBytesBefore) + " -> " +
             llvm::Twine(summary.savedBytesAfter) + " bytes");
  return true;
}

std::unique_ptr<Pass> createActivationCheckpointingPass() {
  return std::make_unique<ActivationCheckpointing>();
}

} // namespace zinc::passes
