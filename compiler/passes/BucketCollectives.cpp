//===- BucketCollectives.cpp - Several small collectives as one -----------===//
//
// One walk in plan order assigns each collective to a bucket; a second
// rewrites each bucket of two or more as one node. Positions are the
// nodes' ordinals in that order, fixed before anything moves.
//
// A gather bucket is anchored at its first member: a later gather joins
// when its shards are complete there. A reduction bucket (ReduceScatter,
// AllReduce) is anchored at its last member: a member may wait for a later
// one while nothing between them reads its results or touches its operands
// (its deadline, below).
//
// Stage 1 all-reduces each gradient in place and at once takes this rank's
// share of it (ShardOf), which the update reads only at the step's end. Such
// a ShardOf moves down with its reduction, to just after the bucket: the
// reduction's deadline is then the first reader of the share, not the
// ShardOf, and stage 1's all-reduces bucket as stage 0's do.
//
//===----------------------------------------------------------------------===//
#include "zinc/passes/BucketCollectives.h"
#include "llvm/ADT/DenseMap.h"
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
    for (std::vector<ir::Node *> &members : closed) {
      merge(members);
      merged += members.size() - 1;
    }
    return merged;
  }

private:
  struct Bucket {
    std::vector<ir::Node *> members;
    uint64_t bytes = 0;
    /// Reductions: the earliest deadline of the members.
    size_t deadline = kNever;
  };

  size_t pos(const ir::Node *n) const { return n ? position.lookup(n) : 0; }

  bool fits(const Bucket &b, uint64_t bytes) const { return b.bytes + bytes <= cap; }

  bool joins(const Bucket &b, const ir::Node &n) const {
    if (n.opType == "AllGather")
      return completeAt(n) < pos(b.members.front()) && !fedByCollective(n);
    return pos(&n) < b.deadline;
  }

  /// Whether a collective defines or writes what gather `n` reads: that one
  /// may itself move down into a bucket of its own, past the gather's new
  /// place, since both moves are judged on the original order.
  bool fedByCollective(const ir::Node &n) const {
    for (ir::Value *v : n.inputs) {
      if (v->def && isBucketable(*v->def))
        return true;
      for (const ir::Use &u : v->uses())
        if (u.user->writesInput(u.operand) && isBucketable(*u.user) && pos(u.user) < pos(&n))
          return true;
    }
    return false;
  }

  void add(Bucket &b, ir::Node *n, uint64_t bytes) {
    b.members.push_back(n);
    b.bytes += bytes;
    if (n->opType != "AllGather")
      b.deadline = std::min(b.deadline, deadline(*n));
  }

  void close(Bucket &b) {
    if (b.members.size() > 1)
      closed.push_back(std::move(b.members));
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

  /// Whether `user`, a reader of what reduction `n` reduces in place, is a
  /// ShardOf that may move down with `n` (into its bucket's place): it
  /// reads only that tensor, after `n`, and nothing else touches the tensor
  /// between them.
  bool sinksWith(const ir::Node &n, const ir::Node &user, const ir::Value *reduced) const {
    if (user.domain != "zinc" || user.opType != "ShardOf" || user.inputs.size() != 1 ||
        user.inputs[0] != reduced || user.outputs.size() != 1 || !user.outputs[0] ||
        pos(&user) <= pos(&n))
      return false;
    for (const ir::Use &u : reduced->uses())
      if (u.user != &n && u.user != &user && pos(u.user) > pos(&n) &&
          pos(u.user) < pos(&user))
        return false;
    return true;
  }

  /// The first position after `n` at which a reduction can no longer run:
  /// a reader of its results, or a node touching its operands (a write of
  /// an input; any access to an operand it reduces in place). A ShardOf
  /// that sinks with it (sinksWith) counts by its own share's readers and
  /// any later toucher of the tensor instead.
  size_t deadline(const ir::Node &n) {
    size_t first = kNever;
    auto after = [&](const ir::Node *user) {
      if (user != &n && pos(user) > pos(&n))
        first = std::min(first, pos(user));
    };
    for (ir::Value *out : n.outputs)
      for (const ir::Use &u : out->uses())
        after(u.user);
    for (unsigned i = 0; i < n.inputs.size(); ++i)
      for (const ir::Use &u : n.inputs[i]->uses()) {
        if (!n.writesInput(i) && !u.user->writesInput(u.operand))
          continue;
        if (n.writesInput(i) && sinksWith(n, *u.user, n.inputs[i])) {
          for (const ir::Use &reader : u.user->outputs[0]->uses())
            after(reader.user);
          sinking[&n].push_back(u.user);
          continue;
        }
        after(u.user);
      }
    return first;
  }

  /// One node for the bucket where its anchor was: the first member for
  /// gathers, the last for reductions.
  void merge(const std::vector<ir::Node *> &members) {
    const ir::Node &first = *members.front();
    bool gather = first.opType == "AllGather";
    ir::Node *anchor = gather ? members.front() : members.back();
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
    // The members' ShardOfs follow the bucket, in the members' order.
    ir::Node *insertAt = g.nextNode(bucket);
    if (!gather)
      for (ir::Node *m : members) {
        auto it = sinking.find(m);
        if (it == sinking.end())
          continue;
        for (ir::Node *shard : it->second) {
          if (shard == insertAt)
            insertAt = g.nextNode(shard);
          else
            g.moveBefore(shard, insertAt);
        }
      }
    for (ir::Node *m : members)
      g.eraseNode(m); // Their outputs' definition is already the bucket.
  }

  ir::Graph &g;
  uint64_t cap;
  llvm::DenseMap<const ir::Node *, size_t> position;
  std::vector<std::vector<ir::Node *>> closed;
  /// Per reduction, the ShardOfs that move down with it (deadline).
  llvm::DenseMap<const ir::Node *, std::vector<ir::Node *>> sinking;
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
