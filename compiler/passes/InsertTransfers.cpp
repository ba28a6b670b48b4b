//===- InsertTransfers.cpp - insert-transfers: move operands where needed -===//
//
// Every node runs in one tier: compute nodes on the GPU, host nodes on the
// CPU. An operand whose home is elsewhere gets a transient copy in that tier,
// made by zinc.Copy nodes on the transfer streams (h2d, d2h, nvme; NVMe and
// GPU only talk through the CPU): prefetches are issued ahead of their use,
// so they overlap earlier compute: by time, when the compilation has a
// hardware description and a prefetch lead (the compute before the user
// covers `lead` times the transfer's own time on its link, and that of the
// hops after it), else a fixed count of compute nodes; values headed for the
// host (gradients) leave as soon as they are complete. An operand a node
// updates in place is written back to its home right after it (CopyInto).
// A copy is reused by later uses close enough behind, and dropped when its
// source is written. First of all, collectives are merged into buckets
// when MemoryOptions::bucketBytes asks (BucketCollectives.h): a bucket's
// operands are then fetched for it as one node's. Last, fetches from NVMe go ahead of the write-backs and
// host-bound reads queued on that link before them (NvmeQueueOrder.h).
// Which memory the copies take is allocate's business.
//
//===----------------------------------------------------------------------===//
#include "zinc/passes/BucketCollectives.h"
#include "zinc/passes/LeadWalk.h"
#include "zinc/passes/NodeCost.h"
#include "zinc/passes/NvmeQueueOrder.h"
#include "zinc/passes/Pass.h"
#include "zinc/support/Error.h"
#include "llvm/ADT/DenseMap.h"

namespace zinc::passes {
namespace {

class InsertTransfers : public Pass {
public:
  llvm::StringRef getName() const override { return "Insert Transfers"; }
  llvm::StringRef getArgument() const override { return "insert-transfers"; }
  llvm::Expected<bool> run(ir::Graph &g, PassContext &ctx) override;
};

bool isTransfer(const ir::Node &n) { return isTransferOp(n.domain, n.opType); }

ir::Tier execTier(const ir::Node &n) {
  return n.stream == ir::Stream::Host ? ir::Tier::Cpu : ir::Tier::Gpu;
}

/// The stream that moves bytes from `from` to `to` (tiers one link apart).
ir::Stream linkStream(ir::Tier from, ir::Tier to) {
  if (from == ir::Tier::Nvme || to == ir::Tier::Nvme)
    return ir::Stream::Nvme;
  return to == ir::Tier::Gpu ? ir::Stream::H2D : ir::Stream::D2H;
}

class Mover {
public:
  Mover(ir::Graph &g, const MemoryOptions &mem, const Hardware *hw)
      : g(g), mem(mem), hw(mem.prefetchLead > 0 ? hw : nullptr) {
    if (this->hw)
      walk.emplace(g, *this->hw);
  }

  llvm::Error run() {
    std::vector<ir::Node *> original(g.nodes().begin(), g.nodes().end());
    for (ir::Node *n : original) {
      ordinal[n] = nextOrdinal++;
      if (isTransfer(*n)) {
        if (auto err = lowerExplicitCopy(n))
          return err;
        if (walk)
          walk->finalize(*n);
        continue;
      }
      ir::Tier here = execTier(*n);
      std::vector<ir::Value *> written;
      std::vector<std::pair<ir::Value *, ir::Node *>> storedBack;
      for (unsigned i = 0; i < n->inputs.size(); ++i) {
        ir::Value *home = n->inputs[i];
        if (home && n->writesInput(i))
          written.push_back(home);
        if (!home || home->tier == here)
          continue;
        ir::Value *local = residentCopy(home, here, n);
        n->setInput(i, local);
        if (n->writesInput(i))
          storedBack.push_back({home, writeBack(local, home, n)});
      }
      for (ir::Value *out : n->outputs)
        if (out)
          out->tier = here;
      for (ir::Value *in : n->inputs)
        if (in)
          lastUse[in] = n;
      // In-place updates make every other copy of the operand stale; the
      // copy the node wrote is new from here on, so a copy made of it for a
      // later user (a GPU copy of a host-updated master) waits for it.
      for (ir::Value *home : written)
        noteWritten(home, n);
      // A home stored back after the node is complete at the store: a later
      // fetch of it (a host-updated gradient accumulator the update reads)
      // must follow that, not only the node.
      for (auto [home, store] : storedBack)
        lastWriter[home] = store;
      for (unsigned i = 0; i < n->inputs.size(); ++i)
        if (n->inputs[i] && n->writesInput(i))
          lastWriter[n->inputs[i]] = n;
      if (walk)
        walk->finalize(*n);
    }
    return llvm::Error::success();
  }

private:
  /// The node before which a copy of `source` into `to` needed by `user`
  /// is inserted. Walks back from the user over the nodes of the compute
  /// stream or of the user's own stream (host updates run back to back
  /// after backward), and the transfers between them: by time, until their
  /// predicted seconds cover the prefetch lead times this copy's seconds
  /// plus `laterHops` (the copies still between its result and the user),
  /// and with prefetchCountsQueue the seconds of the copies on the same
  /// link it passes (the link serves them first); else over the prefetch
  /// distance in nodes. Never past the source's last
  /// writer or definition, and never more than kMaxWalk nodes (kMaxLeadWalk
  /// by time): each copy costs O(1), and a prefetch is never issued so
  /// early that every copy of a step is alive at once.
  ir::Node *insertionPoint(ir::Value *source, ir::Node *user, ir::Tier to,
                           double laterHops) {
    ir::Node *stop = lastWriter.lookup(source);
    if (!stop)
      stop = source->def;
    if (source->tier == ir::Tier::Gpu) // Leaving the GPU: as soon as complete.
      return stop ? g.nextNode(stop) : g.firstNode();
    double need = 0;
    if (hw)
      need = mem.prefetchLead *
             (copySeconds(source->byteSize(), source->tier, to, *hw, g.ranks) + laterHops);
    ir::Stream link = linkStream(source->tier, to);
    // The NVMe link serves its copies in order, and a fetch may find a
    // write-back or a state read for the host in progress (the reorder at
    // the end lets it pass only those still queued): it must be covered too.
    if (hw && mem.nvmeFetchesFirst && link == ir::Stream::Nvme &&
        source->tier == ir::Tier::Nvme && user->stream != ir::Stream::Host)
      need += mem.prefetchLead * longestHostBoundNvmeCopy;
    if (hw) {
      // With prefetchCountsQueue, the link serves the copies in between
      // first: they must be covered too.
      LeadWalk::Query q;
      q.user = user;
      q.stop = stop;
      q.link = link;
      q.need = need;
      q.countsQueue = mem.prefetchCountsQueue;
      q.maxWalk = kMaxLeadWalk;
      return walk->walk(q);
    }
    ir::Node *at = user;
    unsigned seen = 0;
    for (unsigned walked = 0; walked < kMaxWalk && seen < mem.prefetchDistance; ++walked) {
      ir::Node *prev = g.prevNode(at);
      if (!prev || prev == stop)
        break;
      at = prev;
      if (!isTransfer(*at) &&
          (at->stream == ir::Stream::Compute || at->stream == user->stream))
        ++seen;
    }
    return at;
  }

  /// One zinc.Copy of `source` into a new transient value in `to`.
  ir::Value *copyOnce(ir::Value *source, ir::Tier to, ir::Node *user,
                      ir::Node *before) {
    std::string name = g.uniqueValueName(source->name + "@" + ir::tierName(to).str());
    ir::Value *copy = g.addValue(name, source->dtype, source->shape,
                                 ir::ValueRole::Activation);
    copy->tier = to;
    ir::Node *node = g.insertNode(before, "Copy", g.uniqueNodeName(name), {source},
                                  {copy}, {}, "zinc");
    node->stream = linkStream(source->tier, to);
    if (walk)
      walk->inserted(*node, before);
    return copy;
  }

  /// A copy of `home` in tier `to`, valid for `user`: reused when an up to
  /// date one was used recently, else made (through the CPU if needed).
  ir::Value *residentCopy(ir::Value *home, ir::Tier to, ir::Node *user,
                          double laterHops = 0) {
    CopyKey key = copyKey(home, to);
    auto cached = copies.find(key);
    if (cached != copies.end()) {
      ir::Node *prev = lastUse.lookup(cached->second);
      if (prev && ordinal.lookup(user) - ordinal.lookup(prev) <= kReuseWindow)
        return cached->second;
    }
    ir::Value *source = home;
    if ((home->tier == ir::Tier::Nvme && to == ir::Tier::Gpu) ||
        (home->tier == ir::Tier::Gpu && to == ir::Tier::Nvme)) {
      double secondHop =
          hw ? copySeconds(home->byteSize(), ir::Tier::Cpu, to, *hw, g.ranks) : 0;
      source = residentCopy(home, ir::Tier::Cpu, user, laterHops + secondHop);
    }
    ir::Value *copy =
        copyOnce(source, to, user, insertionPoint(source, user, to, laterHops));
    copies[key] = copy;
    if (hw && source->tier == ir::Tier::Nvme && user->stream == ir::Stream::Host)
      noteHostBoundNvmeCopy(source->byteSize(), source->tier, to);
    return copy;
  }

  /// After `writer` updated `local` in place, store it back into `home`;
  /// returns the store.
  ir::Node *writeBack(ir::Value *local, ir::Value *home, ir::Node *writer) {
    ir::Node *after = g.nextNode(writer);
    ir::Value *src = local;
    if ((local->tier == ir::Tier::Gpu && home->tier == ir::Tier::Nvme)) {
      src = copyOnce(local, ir::Tier::Cpu, writer, after);
    }
    ir::Node *store = g.insertNode(after, "CopyInto",
                                   g.uniqueNodeName(home->name + "/writeback"),
                                   {src, home}, {}, {}, "zinc");
    store->stream = linkStream(src->tier, home->tier);
    if (walk)
      walk->inserted(*store, after);
    lastWriter[home] = store;
    if (hw && home->tier == ir::Tier::Nvme)
      noteHostBoundNvmeCopy(home->byteSize(), src->tier, home->tier);
    return store;
  }

  void noteHostBoundNvmeCopy(uint64_t bytes, ir::Tier from, ir::Tier to) {
    longestHostBoundNvmeCopy =
        std::max(longestHostBoundNvmeCopy, copySeconds(bytes, from, to, *hw, g.ranks));
  }

  /// CopyInto(src, dst) placed by an earlier pass: route it through the CPU
  /// when its tiers are not linked, preferring an up-to-date copy of src.
  llvm::Error lowerExplicitCopy(ir::Node *n) {
    ir::Value *src = n->inputs[0];
    ir::Value *dst = n->opType == "CopyInto" ? n->inputs[1] : n->outputs[0];
    for (ir::Tier t : {dst->tier, ir::Tier::Cpu}) {
      auto cached = copies.find(copyKey(src, t));
      if (cached != copies.end() && t != src->tier) {
        src = cached->second;
        break;
      }
    }
    if (src->tier == dst->tier && n->opType == "CopyInto") {
      n->stream = dst->tier == ir::Tier::Gpu ? ir::Stream::Compute : ir::Stream::Host;
    } else {
      if ((src->tier == ir::Tier::Gpu && dst->tier == ir::Tier::Nvme) ||
          (src->tier == ir::Tier::Nvme && dst->tier == ir::Tier::Gpu))
        src = residentCopy(src, ir::Tier::Cpu, n);
      n->stream = linkStream(src->tier, dst->tier);
    }
    n->setInput(0, src);
    lastUse[src] = n;
    if (n->opType == "CopyInto")
      noteWritten(dst, n);
    return llvm::Error::success();
  }

  void noteWritten(ir::Value *v, ir::Node *writer) {
    lastWriter[v] = writer;
    for (ir::Tier t : {ir::Tier::Gpu, ir::Tier::Cpu, ir::Tier::Nvme}) {
      auto it = copies.find(copyKey(v, t));
      // The writer's own operand copy stays valid: it holds the new value.
      if (it != copies.end() && !llvm::is_contained(writer->inputs, it->second))
        copies.erase(it);
    }
  }

  /// Uses at most this many nodes of the pass's input apart share one copy;
  /// beyond, the copy's memory is released in between (the forward and backward uses of a
  /// weight get separate prefetches).
  static constexpr size_t kReuseWindow = 8;
  /// The most nodes a prefetch's insertion point walks back over, by count
  /// and by time.
  static constexpr unsigned kMaxWalk = 64;
  static constexpr unsigned kMaxLeadWalk = 4096;

  ir::Graph &g;
  const MemoryOptions &mem;
  /// The rates prefetches are timed with; null to count nodes.
  const Hardware *hw;
  /// Where timed prefetches go (with hw).
  llvm::Optional<LeadWalk> walk;
  /// The longest NVMe write-back or state read for the host made so far:
  /// what a fetch on that link may find in progress.
  double longestHostBoundNvmeCopy = 0;
  /// The latest copy of a value in a tier, by (value, tier).
  using CopyKey = std::pair<ir::Value *, unsigned>;
  static CopyKey copyKey(ir::Value *v, ir::Tier t) {
    return {v, static_cast<unsigned>(t)};
  }
  llvm::DenseMap<CopyKey, ir::Value *> copies;
  llvm::DenseMap<const ir::Value *, ir::Node *> lastUse;
  llvm::DenseMap<const ir::Value *, ir::Node *> lastWriter;
  /// Position of each node of the pass's input, in its program order.
  llvm::DenseMap<const ir::Node *, size_t> ordinal;
  size_t nextOrdinal = 0;
};

llvm::Expected<bool> InsertTransfers::run(ir::Graph &g, PassContext &ctx) {
  size_t before = g.numNodes();
  size_t bucketed = bucketCollectives(g, ctx.memory.bucketBytes);
  Mover mover(g, ctx.memory, ctx.hardware);
  if (auto err = mover.run())
    return err;
  // Timed prefetches only: without rates there is no bound on the wait.
  const MemoryOptions &mem = ctx.memory;
  size_t reordered = ctx.hardware && mem.prefetchLead > 0 && mem.nvmeFetchesFirst
                         ? letFetchesPassNvmeTraffic(g, *ctx.hardware, mem.prefetchLead)
                         : 0;
  return g.numNodes() != before || bucketed || reordered;
}

} // namespace

std::unique_ptr<Pass> createInsertTransfersPass() {
  return std::make_unique<InsertTransfers>();
}

} // namespace zinc::passes
