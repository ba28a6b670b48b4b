//===- LeadWalk.cpp - Where a timed prefetch is issued, in O(block) a copy ===//
#include "zinc/passes/LeadWalk.h"
#include "zinc/ops/OpEffects.h"
#include "zinc/passes/NodeCost.h"
#include <cmath>

namespace zinc::passes {

/// How far apart two sums of the same seconds taken in different orders
/// may be, relative to their size: a few thousand terms round by at most
/// about 1e-12 of it; a walk whose decision lies within this is redone
/// node by node.
static constexpr double kTieMargin = 1e-9;

static bool isTransfer(const ir::Node &n) {
  return isTransferOp(n.domain, n.opType);
}

static unsigned streamIndex(ir::Stream s) { return static_cast<unsigned>(s); }

LeadWalk::LeadWalk(const ir::Graph &g, const Hardware &hw) : g(g), hw(hw) {
  snapshot.assign(g.nodes().begin(), g.nodes().end());
  // One more block for what is appended after the last snapshot node.
  blocks.resize(snapshot.size() / kBlock + 2);
  info.reserve(snapshot.size() * 2);
  for (size_t i = 0; i < snapshot.size(); ++i) {
    unsigned block = static_cast<unsigned>(i / kBlock);
    info[snapshot[i]] = {block, isTransfer(*snapshot[i])};
    ++blocks[block].nodes;
    ++blocks[block].pending;
  }
}

double LeadWalk::transferSeconds(const ir::Node &copy) const {
  const ir::Value *src = copy.inputs[0];
  const ir::Value *dst =
      copy.opType == "CopyInto" ? copy.inputs[1] : copy.outputs[0];
  if (!src || !dst)
    return 0;
  return copySeconds(src->byteSize(), src->tier, dst->tier, hw, g.ranks);
}

void LeadWalk::finalize(const ir::Node &n) {
  NodeInfo &ni = info.find(&n)->second;
  Block &b = blocks[ni.block];
  if (ni.transfer) {
    b.copies[streamIndex(n.stream)] += transferSeconds(n);
  } else {
    ni.seconds = nodeSeconds(n, hw, g.ranks);
    ni.priced = true;
    b.compute[streamIndex(n.stream)] += ni.seconds;
  }
  --b.pending;
}

void LeadWalk::inserted(const ir::Node &n, const ir::Node *before) {
  // A node inserted before snapshot node i lies after node i - 1: in i's
  // block, as does one inserted before a node inserted there.
  unsigned block = before ? info.find(before)->second.block
                          : static_cast<unsigned>(blocks.size() - 1);
  bool transfer = isTransfer(n);
  info[&n] = {block, transfer};
  Block &b = blocks[block];
  ++b.nodes;
  if (transfer)
    b.copies[streamIndex(n.stream)] += transferSeconds(n);
  else
    b.compute[streamIndex(n.stream)] += nodeSeconds(n, hw, g.ranks);
}

double LeadWalk::coveredIn(const Block &b, ir::Stream userStream) const {
  double covered = b.compute[streamIndex(ir::Stream::Compute)];
  if (userStream != ir::Stream::Compute)
    covered += b.compute[streamIndex(userStream)];
  return covered;
}

ir::Node *LeadWalk::firstNodeOf(unsigned block) const {
  return block == 0 ? g.firstNode() : g.nextNode(snapshot[block * kBlock - 1]);
}

/// One iteration of the node-by-node walk: stops when the walk is long
/// enough, the compute passed covers what is needed, or the next node is
/// the stop (or there is none); else moves `s.at` one node back.
LeadWalk::Step LeadWalk::step(const Query &q, State &s) const {
  if (s.walked >= q.maxWalk)
    return Step::Stopped;
  if (!s.exact &&
      std::fabs(s.covered - s.need) <= kTieMargin * (s.covered + s.need))
    return Step::Tie;
  if (s.covered >= s.need)
    return Step::Stopped;
  ir::Node *prev = g.prevNode(s.at);
  if (!prev || prev == q.stop)
    return Step::Stopped;
  s.at = prev;
  ++s.walked;
  const NodeInfo &ni = info.find(prev)->second;
  if (!ni.transfer) {
    if (prev->stream == ir::Stream::Compute || prev->stream == q.user->stream)
      s.covered += ni.priced ? ni.seconds : nodeSeconds(*prev, hw, g.ranks);
  } else if (q.countsQueue && prev->stream == q.link) {
    s.need += transferSeconds(*prev);
  }
  return Step::Moved;
}

ir::Node *LeadWalk::walkNodeByNode(const Query &q) const {
  State s{q.user};
  s.need = q.need;
  while (step(q, s) == Step::Moved)
    ;
  return s.at;
}

ir::Node *LeadWalk::walk(const Query &q) const {
  State s{q.user};
  s.need = q.need;
  unsigned stopBlock = q.stop ? info.find(q.stop)->second.block : ~0u;
  unsigned cur = info.find(q.user)->second.block;
  for (;;) {
    // Node by node to the first node of block `cur`.
    const ir::Node *boundary = cur > 0 ? snapshot[cur * kBlock - 1] : nullptr;
    while (g.prevNode(s.at) != boundary) {
      Step st = step(q, s);
      if (st == Step::Tie)
        return ++retried, walkNodeByNode(q);
      if (st == Step::Stopped)
        return s.at;
    }
    if (cur == 0) {
      Step st = step(q, s); // There is nothing before: it stops here.
      return st == Step::Tie ? (++retried, walkNodeByNode(q)) : s.at;
    }
    // The block before is passed whole when the walk cannot end in it: it
    // holds no stop, the cap is not reached inside it, and even all of its
    // compute leaves what is needed uncovered (what is needed only grows).
    unsigned prevBlock = cur - 1;
    const Block &b = blocks[prevBlock];
    double covered = coveredIn(b, q.user->stream);
    double queued = q.countsQueue ? b.copies[streamIndex(q.link)] : 0;
    double margin = kTieMargin * (s.covered + covered + s.need + queued);
    bool passes = b.pending == 0 && prevBlock != stopBlock &&
                  s.walked + b.nodes <= q.maxWalk &&
                  s.covered + covered < s.need - margin;
    cur = prevBlock;
    if (!passes)
      continue; // Node by node through it.
    s.walked += b.nodes;
    s.covered += covered;
    s.need += queued;
    s.exact = false;
    s.at = firstNodeOf(prevBlock);
  }
}

} // namespace zinc::passes
