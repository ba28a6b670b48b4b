//===- BucketCollectives.cpp - Several small collectives as one -----------===//
//
// One walk in plan order assigns each collective to a bucket; a second
// rewrites each bucket of two or more as one node. Positions are the
// nodes' ordinals in that order, fixed before anything moves.
//
// A gather bucket is anchored at its first member: a later gather joins
// when its shards are complete there. One that cannot (stages 1-2 rebuild
// each weight right after its update, which the previous gather precedes)
// may instead turn the bucket into one anchored at its last member, as a
// reduction's is, when no member's results are read, nor its operands
// written, before it. A reduction bucket (ReduceScatter,
// AllReduce) is anchored at its last member: a member may wait for a later
// one while nothing between them reads its results or touches its operands
// (its deadline, below).
//
// Stage 1 all-reduces each gradient in place and at once takes this rank's
// share of it (ShardOf), which the update reads only at the step's end; and
// stages 1-2 copy each gathered weight into place at once (CopyInto). Such a
// follower moves down with its collective, to just after the bucket: the
// deadline is then what reads or touches the follower's results, and these
// collectives bucket as stage 0's and 3's do.
//
//===----------------------------------------------------------------------===//
#include "zinc/passes/BucketCollectives.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include <algorithm>
#include <limits>
#include <map>
#include <string>
#include <tuple>

namespace zinc::passes {
namespace {

constexpr size_t kNever = std::numeric_limits<size_t>::max();

bool isBucketable(const ir::Node &n) {
  return n.domain == "zinc" && n.stream == ir::Stream::Collective &&
         (n.opType == "AllGather" || n.opType == "ReduceScatter" || n.opType == "AllReduce") &&
         !n.inputs.empty() && llvm::all_of(n.inputs, [](ir::Value *v) { return v; }) &&
         llvm::all_of(n.outputs, [](ir::Value *v) { return v; });
}

/// Collectives of one bucket must agree on these.
using Kind = std::tuple<std::string, std::string, DType>;

Kind kindOf(const ir::Node &n) {
  return {n.opType, n.attrs.getString("op", "").str(), n.inputs[0]->dtype};
}

/// The whole tensors' bytes: what crosses the links.
uint64_t wholeBytes(const ir::Node &n) {
  uint64_t total = 0;
  for (ir::Value *v : n.opType == "AllGather" ? llvm::ArrayRef<ir::Value *>(n.outputs)
                                              : llvm::ArrayRef<ir::Value *>(n.inputs))
    total += v->byteSize();
  return total;
}

class Bucketer {
public:
  Bucketer(ir::Graph &g, uint64_t cap) : g(g), cap(cap) {}

  size_t run() {
    size_t next = 1; // 0: before every node (graph inputs are complete there).
    for (ir::Node *n : g.nodes())
      position[n] = next++;
    std::map<Kind, Bucket> open;
    for (ir::Node *n : g.nodes()) {
      if (!isBucketable(*n))
        continue;
      uint64_t bytes = wholeBytes(*n);
      if (bytes >= cap)
        continue;
      Bucket &b = open[kindOf(*n)];
      if (!b.members.empty() && !(fits(b, bytes) && joins(b, *n)))
        close(b);
      add(b, n, bytes);
    }
    for (auto &[kind, b] : open)
      close(b);
    size_t merged = 0;
    for (Closed &c : closed) {
      merge(c.members, c.late);
      merged += c.members.size() - 1;
    }
    return merged;
  }

private:
  struct Bucket {
    std::vector<ir::Node *> members;
    uint64_t bytes = 0;
    /// The earliest deadline of the members.
    size_t deadline = kNever;
    /// A gather bucket anchored at its last member.
    bool late = false;
  };
  struct Closed {
    std::vector<ir::Node *> members;
    bool late = false;
  };

  size_t pos(const ir::Node *n) const { return n ? position.lookup(n) : 0; }

  bool fits(const Bucket &b, uint64_t bytes) const { return b.bytes + bytes <= cap; }

  bool joins(Bucket &b, const ir::Node &n) const {
    if (n.opType == "AllGather" && b.late)
      return pos(&n) < b.deadline && onGpu(n);
    if (n.opType == "AllGather") {
      if (completeAt(n) < pos(b.members.front()) && !fedByCollective(n))
        return true;
      // Anchored at `n` instead, if every member may wait for it. Only
      // for gathers of the GPU tier: transfers, inserted after this,
      // stage a tier's tensors around where the step reads them.
      b.late = pos(&n) < b.deadline && onGpu(n) && llvm::all_of(b.members, [&](ir::Node *m) {
                 return onGpu(*m);
               });
      return b.late;
    }
    return pos(&n) < b.deadline;
  }

  /// Whether a collective, or a node that may move down with one (a
  /// follower), defines or writes what gather `n` reads: that one may itself
  /// move down, past the gather's new place, since both moves are judged on
  /// the original order.
  bool fedByCollective(const ir::Node &n) const {
    auto mayMoveDown = [&](const ir::Node *m) { return isBucketable(*m) || followers.count(m); };
    for (ir::Value *v : n.inputs) {
      if (v->def && mayMoveDown(v->def))
        return true;
      for (const ir::Use &u : v->uses())
        if (u.user->writesInput(u.operand) && mayMoveDown(u.user) && pos(u.user) < pos(&n))
          return true;
    }
    return false;
  }

  void add(Bucket &b, ir::Node *n, uint64_t bytes) {
    b.members.push_back(n);
    b.bytes += bytes;
    b.deadline = std::min(b.deadline, deadline(*n));
  }

  void close(Bucket &b) {
    if (b.members.size() > 1)
      closed.push_back({std::move(b.members), b.late});
    b = Bucket();
  }

  /// A gather's shards are complete after this position: their definition
  /// or the last write before the gather (0 for graph inputs).
  size_t completeAt(const ir::Node &n) const {
    size_t at = 0;
    for (ir::Value *v : n.inputs) {
      if (v->def)
        at = std::max(at, pos(v->def));
      for (const ir::Use &u : v->uses())
        if (u.user->writesInput(u.operand) && pos(u.user) < pos(&n))
          at = std::max(at, pos(u.user));
    }
    return at;
  }

  static bool onGpu(const ir::Node &n) {
    auto gpu = [](const ir::Value *v) { return !v || v->tier == ir::Tier::Gpu; };
    return llvm::all_of(n.inputs, gpu) && llvm::all_of(n.outputs, gpu);
  }

  /// Whether `user`, a reader of `v` (what reduction `n` reduces in place,
  /// or what gather `n` gathers), may move down with `n` into its bucket's
  /// place: it only takes `v` somewhere else (this rank's share of it,
  /// ShardOf; or a copy into a tensor of its own, CopyInto, as stages 1-2
  /// refresh each weight from its gather), and nothing touches `v` between
  /// `n` and it.
  bool sinksWith(const ir::Node &n, const ir::Node &user, const ir::Value *v) const {
    if (user.domain != "zinc" || user.inputs.empty() || user.inputs[0] != v ||
        pos(&user) <= pos(&n))
      return false;
    bool share = user.opType == "ShardOf" && user.inputs.size() == 1 &&
                 user.outputs.size() == 1 && user.outputs[0];
    bool copy = user.opType == "CopyInto" && user.inputs.size() == 2 && user.inputs[1] &&
                user.inputs[1] != v && user.writesInput(1) && !user.writesInput(0) &&
                onGpu(user);
    if (!share && !copy)
      return false;
    for (const ir::Use &u : v->uses())
      if (u.user != &n && u.user != &user && pos(u.user) > pos(&n) &&
          pos(u.user) < pos(&user))
        return false;
    return true;
  }

  /// The first position after `n` at which a reduction, or a gather moved
  /// down, can no longer run: a reader of its results, or a node touching
  /// its operands (a write of an input; any access to an operand it reduces
  /// in place). A node that sinks with it (sinksWith) counts by what comes
  /// after it instead: its results' readers, and the later users of what it
  /// writes.
  size_t deadline(const ir::Node &n) {
    size_t first = kNever;
    auto after = [&](const ir::Node *user) {
      if (user != &n && pos(user) > pos(&n))
        first = std::min(first, pos(user));
    };
    auto readOf = [&](const ir::Use &u, const ir::Value *v) {
      if (!sinksWith(n, *u.user, v))
        return after(u.user);
      const ir::Node &follower = *u.user;
      for (ir::Value *out : follower.outputs)
        for (const ir::Use &r : out->uses())
          after(r.user);
      for (unsigned j = 0; j < follower.inputs.size(); ++j)
        if (follower.writesInput(j))
          for (const ir::Use &r : follower.inputs[j]->uses())
            if (r.user != &follower && pos(r.user) > pos(&follower))
              after(r.user);
      sinking[&n].push_back(u.user);
      followers.insert(u.user);
    };
    for (ir::Value *out : n.outputs)
      for (const ir::Use &u : out->uses())
        readOf(u, out);
    for (unsigned i = 0; i < n.inputs.size(); ++i)
      for (const ir::Use &u : n.inputs[i]->uses()) {
        if (n.writesInput(i))
          readOf(u, n.inputs[i]);
        else if (u.user->writesInput(u.operand))
          after(u.user);
      }
    return first;
  }

  /// One node for the bucket where its anchor was: the first member for
  /// gathers (unless `late`), the last for reductions.
  void merge(const std::vector<ir::Node *> &members, bool late) {
    const ir::Node &first = *members.front();
    bool gather = first.opType == "AllGather";
    ir::Node *anchor = gather && !late ? members.front() : members.back();
    std::vector<ir::Value *> ins, outs;
    for (const ir::Node *m : members) {
      ins.insert(ins.end(), m->inputs.begin(), m->inputs.end());
      outs.insert(outs.end(), m->outputs.begin(), m->outputs.end());
    }
    std::string name = g.uniqueNodeName(
        (llvm::Twine("bucket/") + first.opType + "/" + llvm::Twine(members.size())).str());
    ir::Node *bucket =
        g.insertNode(anchor, first.opType, name, ins, outs, first.attrs, first.domain);
    bucket->stream = ir::Stream::Collective;
    // What moves down with the members follows the bucket, in its original
    // order. A follower already past the anchor stays where it is: moving
    // it up would cross nodes nothing checked it against.
    if (!gather || late) {
      std::vector<ir::Node *> moving;
      for (ir::Node *m : members) {
        auto it = sinking.find(m);
        if (it == sinking.end())
          continue;
        for (ir::Node *follower : it->second)
          if (pos(follower) < pos(anchor))
            moving.push_back(follower);
      }
      std::sort(moving.begin(), moving.end(),
                [&](const ir::Node *a, const ir::Node *b) { return pos(a) < pos(b); });
      for (ir::Node *follower : moving)
        g.moveBefore(follower, anchor); // The anchor goes; they follow the bucket.
    }
    for (ir::Node *m : members)
      g.eraseNode(m); // Their outputs' definition is already the bucket.
  }

  ir::Graph &g;
  uint64_t cap;
  llvm::DenseMap<const ir::Node *, size_t> position;
  std::vector<Closed> closed;
  /// Per collective, the nodes that may move down with it (deadline), and
  /// all of them.
  llvm::DenseMap<const ir::Node *, std::vector<ir::Node *>> sinking;
  llvm::DenseSet<const ir::Node *> followers;
};

} // namespace

size_t bucketCollectives(ir::Graph &g, uint64_t capBytes) {
  if (capBytes == 0)
    return 0;
  return Bucketer(g, capBytes).run();
}

std::vector<uint64_t> bucketSizesToTry(const Hardware &hw, unsigned ranks) {
  if (ranks <= 1)
    return {};
  bool withinNode = ranks <= hw.gpusPerNode;
  double bandwidth = withinNode ? hw.intraNodeBandwidth : hw.interNodeBandwidth;
  double latency = withinNode ? hw.intraNodeLatency : hw.interNodeLatency;
  // A ring collective of B bytes takes (r-1)/r * B/bw + (r-1) * latency:
  // its transfer equals its latency at B = r * latency * bw.
  double breakEven = ranks * latency * bandwidth;
  if (!(breakEven >= 1))
    return {};
  std::vector<uint64_t> sizes;
  for (double multiple : {2.0, 8.0, 32.0})
    sizes.push_back(static_cast<uint64_t>(multiple * breakEven));
  return sizes;
}

} // namespace zinc::passes
