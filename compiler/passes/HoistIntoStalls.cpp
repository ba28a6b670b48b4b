//===- HoistIntoStalls.cpp - Independent compute fills the waits ----------===//
//
// One walk over the nodes in their order, with the predicted timeline of
// that order: a compute node that starts later than the compute before it
// ended waits for an event (a transfer, a collective). The nodes after it
// are scanned; those that stay keep a record of what they define, write
// and read, against which each later candidate is checked. Each node's
// declared effects and each value's in-place writers are looked up once,
// before the walk: a candidate's check then reads its own operands, not
// every use of them (a gathered weight of a 10^6-node ZeRO-3 plan has
// thousands).
//
//===----------------------------------------------------------------------===//
#include "zinc/passes/HoistIntoStalls.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include <algorithm>

namespace zinc::passes {
namespace {

class Hoister {
public:
  Hoister(ir::Graph &g, llvm::ArrayRef<plan::PredictedInstruction> timeline, double minStall,
          size_t window)
      : g(g), timeline(timeline), minStall(minStall), window(window) {}

  size_t run() {
    nodes.assign(g.nodes().begin(), g.nodes().end());
    if (nodes.size() != timeline.size())
      return 0; // Not this graph's timeline.
    effects.reserve(nodes.size());
    for (size_t i = 0; i < nodes.size(); ++i) {
      index[nodes[i]] = i;
      effects.push_back(&nodes[i]->effects());
      if (effects[i]->updatesInPlace())
        for (unsigned k = 0; k < nodes[i]->inputs.size(); ++k)
          if (ir::Value *v = nodes[i]->inputs[k]; v && effects[i]->writesInput(k)) {
            Writers &w = inPlaceWriters[v];
            if (!w.at.empty() && w.at.back() == i)
              continue; // The same node writing it through two operands.
            w.latestEnd.push_back(
                std::max(w.latestEnd.empty() ? timeline[i].end : w.latestEnd.back(),
                         timeline[i].end));
            w.at.push_back(i);
          }
    }
    moved.assign(nodes.size(), false);
    size_t total = 0;
    double computeFree = 0;
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (nodes[i]->stream != ir::Stream::Compute)
        continue;
      double idleFrom = computeFree;
      computeFree = timeline[i].end;
      double stall = timeline[i].start - idleFrom;
      if (moved[i] || stall < minStall)
        continue;
      total += fill(i, idleFrom, stall);
    }
    return total;
  }

private:
  double seconds(size_t i) const { return timeline[i].end - timeline[i].start; }
  /// Whether node i updates its input k in place, as declared.
  bool writes(size_t i, unsigned k) const {
    return nodes[i]->inputs[k] && effects[i]->writesInput(k);
  }

  /// Moves compute from after node `at` to just before it, covering up to
  /// `stall` seconds of the wait that begins at `idleFrom`.
  size_t fill(size_t at, double idleFrom, double stall) {
    llvm::DenseSet<const ir::Value *> writtenBetween, readBetween;
    llvm::DenseSet<const ir::Node *> hoisted;
    auto stays = [&](size_t i) {
      const ir::Node &n = *nodes[i];
      for (unsigned k = 0; k < n.inputs.size(); ++k)
        if (const ir::Value *v = n.inputs[k]) {
          readBetween.insert(v);
          if (writes(i, k))
            writtenBetween.insert(v);
        }
      for (const ir::Value *v : n.outputs)
        if (v)
          writtenBetween.insert(v);
    };
    stays(at);
    std::vector<ir::Node *> chosen;
    double covered = 0;
    for (size_t j = at + 1; j < nodes.size() && j <= at + window && covered < stall; ++j) {
      if (moved[j])
        continue; // Already ahead of an earlier wait.
      ir::Node &m = *nodes[j];
      if (m.stream == ir::Stream::Compute && independent(j, writtenBetween, readBetween) &&
          readyBy(m, j, at, idleFrom + covered, hoisted)) {
        chosen.push_back(&m);
        hoisted.insert(&m);
        moved[j] = true;
        covered += seconds(j);
        continue;
      }
      stays(j);
    }
    for (ir::Node *m : chosen)
      g.moveBefore(m, nodes[at]);
    return chosen.size();
  }

  /// Whether node j can run before the nodes that stay between the wait
  /// and it.
  bool independent(size_t j, const llvm::DenseSet<const ir::Value *> &writtenBetween,
                   const llvm::DenseSet<const ir::Value *> &readBetween) const {
    const ir::Node &m = *nodes[j];
    for (unsigned k = 0; k < m.inputs.size(); ++k) {
      const ir::Value *v = m.inputs[k];
      if (!v)
        continue;
      if (writtenBetween.count(v))
        return false; // It reads what they produce or update.
      if (writes(j, k) && readBetween.count(v))
        return false; // It would update what they read first.
    }
    return true;
  }

  /// Whether every value `m` (at position j, a candidate for the wait at
  /// `waitAt`) reads is predicted complete by `when`: its definition and
  /// in-place writers before it have ended, or are among the nodes moved
  /// with it.
  bool readyBy(const ir::Node &m, size_t j, size_t waitAt, double when,
               const llvm::DenseSet<const ir::Node *> &hoisted) const {
    auto done = [&](const ir::Node *writer) {
      if (!writer || hoisted.count(writer))
        return true;
      auto it = index.find(writer);
      return it == index.end() || it->second >= j || timeline[it->second].end <= when;
    };
    for (const ir::Value *v : m.inputs) {
      if (!v)
        continue;
      if (!done(v->def))
        return false;
      auto found = inPlaceWriters.find(v);
      if (found == inPlaceWriters.end())
        continue;
      // Writers from j on are not ahead of it. Those before the wait
      // cannot be among the nodes moved with it: the latest end among
      // them decides, read from the running maximum. Only those between
      // the wait and j (within the window) are looked at one by one.
      const Writers &w = found->second;
      size_t beforeWait = std::lower_bound(w.at.begin(), w.at.end(), waitAt) - w.at.begin();
      if (beforeWait && w.latestEnd[beforeWait - 1] > when)
        return false;
      for (size_t k = beforeWait; k < w.at.size() && w.at[k] < j; ++k)
        if (!done(nodes[w.at[k]]))
          return false;
    }
    return true;
  }

  ir::Graph &g;
  llvm::ArrayRef<plan::PredictedInstruction> timeline;
  double minStall;
  size_t window;
  std::vector<ir::Node *> nodes;
  llvm::DenseMap<const ir::Node *, size_t> index;
  /// effects[i]: node i's declared effects.
  std::vector<const OpEffects *> effects;
  /// The nodes (by index, ascending) that update a value in place, and
  /// the latest predicted end among the first k + 1 of them.
  struct Writers {
    llvm::SmallVector<size_t, 2> at;
    llvm::SmallVector<double, 2> latestEnd;
  };
  llvm::DenseMap<const ir::Value *, Writers> inPlaceWriters;
  std::vector<bool> moved;
};

} // namespace

double predictedComputeWaits(const ir::Graph &g,
                             llvm::ArrayRef<plan::PredictedInstruction> timeline,
                             double minStallSeconds) {
  if (g.numNodes() != timeline.size())
    return 0;
  double total = 0, computeFree = 0;
  size_t i = 0;
  for (const ir::Node *n : g.nodes()) {
    const plan::PredictedInstruction &at = timeline[i++];
    if (n->stream != ir::Stream::Compute)
      continue;
    if (at.start - computeFree >= minStallSeconds)
      total += at.start - computeFree;
    computeFree = at.end;
  }
  return total;
}

size_t hoistIntoStalls(ir::Graph &g, llvm::ArrayRef<plan::PredictedInstruction> timeline,
                       double minStallSeconds, size_t window) {
  return Hoister(g, timeline, minStallSeconds, window).run();
}

} // namespace zinc::passes
