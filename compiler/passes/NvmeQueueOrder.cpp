//===- NvmeQueueOrder.cpp - Fetches ahead of the NVMe link's other traffic ===//
//
// One scan in program order keeps the NVMe copies that a fetch may pass
// (write-backs, state reads for the host) pending. A fetch that depends on
// none of them passes them all; a node that depends on one (it reads what a
// pending read produced, reads the home a pending write-back stores, or
// overwrites what a write-back reads) first puts the pending copies back,
// right behind the last fetch that passed them. So every dependence of the
// original order is kept, and only independent copies change places.
//
// Passing is bounded in time: a held copy lets through only the fetches
// issued within `lead` times its own link seconds of predicted compute
// after it, the time it would have held the link anyway. Past that it goes
// ahead of the next fetch; held without bound, write-backs would pile up
// behind the step's last fetch while the link idles (gpt-13b's fp16 step:
// 13 s of NVMe writes after the last compute node).
//
//===----------------------------------------------------------------------===//
#include "zinc/passes/NvmeQueueOrder.h"
#include "zinc/ops/OpEffects.h"
#include "zinc/passes/NodeCost.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include <algorithm>
#include <limits>
#include <vector>

namespace zinc::passes {
namespace {

bool onNvme(const ir::Node &n) {
  return n.stream == ir::Stream::Nvme && isTransferOp(n.domain, n.opType) &&
         !n.inputs.empty() && n.inputs[0];
}

/// An NVMe read whose copy something off the host waits for (a state read
/// is used by its host update and by its own write-back, on the NVMe link).
bool isFetch(const ir::Node &n) {
  if (!onNvme(n) || n.opType != "Copy" || n.inputs[0]->tier != ir::Tier::Nvme ||
      n.outputs.empty() || !n.outputs[0])
    return false;
  for (const ir::Use &u : n.outputs[0]->uses())
    if (u.user->stream != ir::Stream::Host &&
        u.user->stream != ir::Stream::Nvme)
      return true;
  return false;
}

class Reorder {
public:
  Reorder(ir::Graph &g, const Hardware &hw, double lead)
      : g(g), hw(hw), lead(lead) {}

  size_t run() {
    std::vector<ir::Node *> order(g.nodes().begin(), g.nodes().end());
    for (size_t i = 0; i < order.size(); ++i) {
      ir::Node *n = order[i];
      bool fetch = isFetch(*n);
      if (dependsOnPending(*n) || (!pending.empty() && clock > deadline))
        putBack();
      if (n->stream == ir::Stream::Compute &&
          !isTransferOp(n->domain, n->opType))
        clock += nodeSeconds(*n, hw, g.ranks);
      if (fetch) {
        if (!pending.empty())
          lastPassed = n, passedAt = pending.size();
        continue;
      }
      if (onNvme(*n))
        hold(n);
    }
    putBack();
    return moved;
  }

private:
  void hold(ir::Node *n) {
    if (pending.empty())
      deadline = std::numeric_limits<double>::infinity();
    deadline = std::min(deadline, clock + lead * linkSeconds(*n));
    pending.push_back(n);
    if (n->opType == "CopyInto" && n->inputs.size() > 1 && n->inputs[1]) {
      storedHomes.insert(n->inputs[1]);
      readSources.insert(n->inputs[0]);
    }
    for (ir::Value *out : n->outputs)
      if (out)
        produced.insert(out);
  }

  double linkSeconds(const ir::Node &copy) const {
    const ir::Value *src = copy.inputs[0];
    const ir::Value *dst = copy.opType == "CopyInto" && copy.inputs.size() > 1
                               ? copy.inputs[1]
                           : copy.outputs.empty() ? nullptr
                                                  : copy.outputs[0];
    return dst ? copySeconds(src->byteSize(), src->tier, dst->tier, hw, g.ranks)
               : 0;
  }

  bool dependsOnPending(const ir::Node &n) const {
    if (pending.empty())
      return false;
    for (unsigned i = 0; i < n.inputs.size(); ++i) {
      ir::Value *v = n.inputs[i];
      if (!v)
        continue;
      if (produced.count(v) || storedHomes.count(v))
        return true;
      if (n.writesInput(i) && readSources.count(v))
        return true;
    }
    for (ir::Value *out : n.outputs)
      if (out && readSources.count(out))
        return true;
    return false;
  }

  /// The pending copies a fetch passed go right behind the last such
  /// fetch, in their order; those queued after it stay where they are.
  void putBack() {
    if (lastPassed) {
      ir::Node *anchor = g.nextNode(lastPassed);
      for (size_t i = 0; i < passedAt; ++i) {
        g.moveBefore(pending[i], anchor);
        ++moved;
      }
    }
    pending.clear();
    storedHomes.clear();
    readSources.clear();
    produced.clear();
    lastPassed = nullptr;
    passedAt = 0;
  }

  ir::Graph &g;
  const Hardware &hw;
  double lead;
  /// Predicted compute seconds of the nodes scanned so far, and the time
  /// by which the oldest held copy must go.
  double clock = 0, deadline = 0;
  std::vector<ir::Node *> pending;
  llvm::DenseSet<const ir::Value *> storedHomes, readSources, produced;
  ir::Node *lastPassed = nullptr;
  /// How many of the pending copies precede lastPassed.
  size_t passedAt = 0;
  size_t moved = 0;
};

} // namespace

size_t letFetchesPassNvmeTraffic(ir::Graph &g, const Hardware &hw,
                                 double lead) {
  return Reorder(g, hw, std::max(lead, 1.0)).run();
}

} // namespace zinc::passes
