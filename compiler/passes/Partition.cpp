//===- Partition.cpp - partition: ZeRO's shards and collectives -----------===//
//
// Data parallelism over N ranks (--ranks), each running this step on its
// share of the batch. ZeRO (--zero-stage) decides which model state every
// rank holds whole and which only as its shard: one rank's padded 1/N of
// the flattened tensor (ir::Value::shardOf).
//
//   stage 0  gradients all-reduced (averaged); every rank updates everything.
//   stage 1  + the fp32 master weights and optimizer states are sharded:
//            each rank updates its shard from its shard of the all-reduced
//            gradient, and an allgather rebuilds the compute weights.
//   stage 2  + gradients are reduce-scattered (averaged) to their owners
//            as soon as they are complete; the whole gradient then dies.
//   stage 3  + the compute weights are sharded too (bandwidth-centric, as
//            in ZeRO-Infinity): each rank keeps only its shard in its home
//            tier (GPU, CPU or NVMe, chosen later by plan-memory, so it fetches
//            only that), and an allgather rebuilds the whole weight on the
//            GPU just before it is read, released after use and gathered
//            again for backward. A tile's weight is a parameter of its
//            own (the tile pass), so tiles are gathered one at a time.
//
// Collectives are zinc ops with declared effects (Ops.def) on the
// collective stream; the plan's events order them against compute, so
// they overlap whatever does not touch their bytes. fp16 loss scaling's
// overflow flag is max-reduced before the updates, so every rank skips
// the same steps. The pass runs before place: placement and allocation
// see each rank's shard sizes.
//
// Not sharded: frozen weights and model state (BatchNorm's running
// statistics, updated from each rank's own batch, as DDP does).
//
//===----------------------------------------------------------------------===//
#include "zinc/passes/LastWriter.h"
#include "zinc/passes/OptimizerOps.h"
#include "zinc/passes/Pass.h"
#include "zinc/support/Error.h"
#include "llvm/ADT/DenseMap.h"

namespace zinc::passes {
namespace {

class Partition : public Pass {
public:
  llvm::StringRef getName() const override { return "ZeRO Partitioning"; }
  llvm::StringRef getArgument() const override { return "partition"; }
  llvm::Expected<bool> run(ir::Graph &g, PassContext &ctx) override;
  bool isEnabled(const PassContext &ctx) const override {
    return ctx.zero.ranks > 1;
  }
};

/// Users of a gathered weight at most this many nodes (of the pass's input)
/// after the first share one gather; a later user gathers again, so the
/// whole weight is not held from forward to backward.
constexpr size_t kGatherReuseWindow = 8;

class Partitioner {
public:
  Partitioner(ir::Graph &g, const ZeroOptions &zero) : g(g), zero(zero) {}

  llvm::Error run() {
    size_t next = 0;
    for (ir::Node *n : g.nodes())
      ordinal[n] = next++;
    std::vector<ir::Node *> updates;
    for (ir::Node *n : g.nodes())
      if (isOptimizerNode(*n))
        updates.push_back(n);
    for (ir::Node *update : updates)
      if (auto err = partitionUpdate(update))
        return err;
    if (!updates.empty())
      agreeOnOverflow(updates.front());
    return llvm::Error::success();
  }

private:
  /// Turns `v` into its shard, in place: same name, shape [s].
  void shardInPlace(ir::Value *v) {
    v->shardOf.assign(v->shape.begin(), v->shape.end());
    v->shape = {shardElements(v->numElements(), g.ranks)};
  }

  /// A new value holding this rank's shard of `whole`.
  ir::Value *newShardOf(ir::Value *whole, llvm::StringRef suffix, ir::ValueRole role) {
    ir::Value *s = g.addValue(g.uniqueValueName(whole->name + suffix.str()), whole->dtype,
                              {shardElements(whole->numElements(), g.ranks)}, role);
    s->shardOf.assign(whole->shape.begin(), whole->shape.end());
    return s;
  }

  ir::Node *collective(ir::Node *before, llvm::StringRef op, llvm::StringRef name,
                       llvm::ArrayRef<ir::Value *> ins, llvm::ArrayRef<ir::Value *> outs,
                       AttributeList attrs = {}) {
    ir::Node *n = g.insertNode(before, op, g.uniqueNodeName(name), ins, outs,
                               std::move(attrs), "zinc");
    n->stream = ir::Stream::Collective;
    return n;
  }

  static AttributeList reduction(llvm::StringRef op) {
    AttributeList attrs;
    attrs.set(makeStringAttr("op", op));
    return attrs;
  }

  /// The gradient's route to the update: all-reduced (stages 0, 1, then
  /// this rank's shard of it for a sharded update) or reduce-scattered.
  ir::Value *reduceGradient(ir::Value *grad, ir::Node *update) {
    ir::Node *done = lastWriterBefore(grad, update, ordinal);
    ir::Node *after = done ? g.nextNode(done) : g.firstNode();
    if (zero.stage <= 1) {
      collective(after, "AllReduce", grad->name + "/allreduce", {grad}, {},
                 reduction("mean"));
      if (zero.stage == 0)
        return grad;
      ir::Value *shard = newShardOf(grad, ".shard", ir::ValueRole::Activation);
      g.insertNode(after, "ShardOf", g.uniqueNodeName(shard->name), {grad}, {shard},
                   {}, "zinc");
      return shard;
    }
    ir::Value *shard = newShardOf(grad, ".shard", ir::ValueRole::Activation);
    collective(after, "ReduceScatter", grad->name + "/reduce_scatter", {grad},
               {shard}, reduction("mean"));
    return shard;
  }

  llvm::Error partitionUpdate(ir::Node *update) {
    ir::Value *master = update->inputs[0];
    ir::Value *grad = update->inputs[1];
    if (!master || !grad)
      return makeError("partition: " + update->describe() + " has no parameter or gradient");
    update->setInput(1, reduceGradient(grad, update));
    if (zero.stage == 0)
      return llvm::Error::success();

    bool adam = update->opType != "SGD";
    unsigned states = adam ? 2 : 1;
    for (unsigned i = 2; i < 2 + states && i < update->inputs.size(); ++i)
      if (ir::Value *s = update->inputs[i])
        shardInPlace(s);
    // The compute-precision copy the update refreshes (mixed precision).
    unsigned copySlot = 2 + states;
    ir::Value *copy = copySlot < update->inputs.size() ? update->inputs[copySlot] : nullptr;
    // What forward and backward read: the copy, or the fp32 weight itself.
    ir::Value *computeWeight = copy ? copy : master;
    bool masterOnlyUpdated = llvm::all_of(master->uses(), [&](const ir::Use &u) {
      return u.user == update;
    });

    if (zero.stage == 3) {
      // Every class sharded: the update works on shards only, and readers
      // of the weight gather it.
      shardInPlace(master);
      if (copy)
        shardInPlace(copy);
      gatherForReaders(computeWeight, update);
      return llvm::Error::success();
    }

    // Stages 1 and 2: the master is sharded, the compute weight stays
    // whole and is rebuilt from every rank's updated shard.
    ir::Value *shardMaster = master;
    if (masterOnlyUpdated) {
      shardInPlace(master);
    } else {
      // fp32: the parameter is master and compute weight at once. The
      // whole one becomes the compute copy (loaded from the same
      // initializer); the update gets a sharded master of its own.
      shardMaster = newShardOf(master, ".master", ir::ValueRole::Parameter);
      shardMaster->init = master->init;
      master->role = ir::ValueRole::State;
      update->setInput(0, shardMaster);
    }
    if (copy)
      update->setInput(copySlot, nullptr);
    ir::Node *after = g.nextNode(update);
    ir::Value *source = shardMaster;
    if (computeWeight->dtype != shardMaster->dtype) {
      source = newShardOf(computeWeight, ".shard", ir::ValueRole::Activation);
      AttributeList to;
      to.set(makeIntAttr("to", static_cast<int64_t>(computeWeight->dtype)));
      g.insertNode(after, "Cast", g.uniqueNodeName(source->name + "/cast"), {shardMaster},
                   {source}, std::move(to));
    }
    ir::Value *whole = g.addValue(g.uniqueValueName(computeWeight->name + ".gathered"),
                                  computeWeight->dtype, computeWeight->shape,
                                  ir::ValueRole::Activation);
    collective(after, "AllGather", computeWeight->name + "/allgather", {source}, {whole});
    g.insertNode(after, "CopyInto", g.uniqueNodeName(computeWeight->name + "/refresh"),
                 {whole, computeWeight}, {}, {}, "zinc");
    return llvm::Error::success();
  }

  /// Stage 3: each reader of the sharded weight (but its update) reads a
  /// whole copy gathered just before it; readers close behind share one.
  void gatherForReaders(ir::Value *shard, ir::Node *update) {
    std::vector<ir::Node *> readers;
    for (const ir::Use &u : shard->uses())
      if (u.user != update && !llvm::is_contained(readers, u.user))
        readers.push_back(u.user);
    llvm::sort(readers, [&](ir::Node *a, ir::Node *b) {
      return ordinal.lookup(a) < ordinal.lookup(b);
    });
    ir::Value *whole = nullptr;
    size_t gatheredFor = 0;
    for (ir::Node *reader : readers) {
      size_t at = ordinal.lookup(reader);
      if (!whole || at - gatheredFor > kGatherReuseWindow) {
        whole = g.addValue(g.uniqueValueName(shard->name + ".gathered"), shard->dtype,
                           shard->shardOf, ir::ValueRole::Activation);
        collective(reader, "AllGather", shard->name + "/allgather", {shard}, {whole});
        gatheredFor = at;
      }
      reader->replaceUsesOfWith(shard, whole);
    }
  }

  /// fp16 loss scaling: a step is skipped when any rank's gradients
  /// overflowed, so the flag is max-reduced before the first update reads it.
  void agreeOnOverflow(ir::Node *firstUpdate) {
    for (ir::Node *n : g.nodes())
      if (n->domain == kZincDomain && n->opType == "CheckFiniteGrads" && n->inputs[0]) {
        collective(firstUpdate, "AllReduce", n->inputs[0]->name + "/allreduce",
                   {n->inputs[0]}, {}, reduction("max"));
        return;
      }
  }

  ir::Graph &g;
  const ZeroOptions &zero;
  /// Position of each node of the pass's input.
  llvm::DenseMap<const ir::Node *, size_t> ordinal;
};

llvm::Expected<bool> Partition::run(ir::Graph &g, PassContext &ctx) {
  const ZeroOptions &zero = ctx.zero;
  if (zero.ranks < 1 || zero.ranks > kMaxRanks)
    return makeError("--ranks must be between 1 and " + llvm::Twine(kMaxRanks));
  if (zero.stage > 3)
    return makeError("--zero-stage must be 0, 1, 2 or 3");
  g.ranks = zero.ranks;
  if (zero.ranks == 1)
    return false;
  Partitioner partitioner(g, zero);
  if (auto err = partitioner.run())
    return std::move(err);
  return true;
}

} // namespace

std::unique_ptr<Pass> createPartitionPass() { return std::make_unique<Partition>(); }

} // namespace zinc::passes
