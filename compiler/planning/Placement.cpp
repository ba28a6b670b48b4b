//===- Placement.cpp - The home tier of every persistent tensor -----------===//
//
// The placement policy, separate from the allocator (as XLA separates
// memory-space assignment from its heap simulator): the search
// (SearchDriver.cpp) chooses concrete tiers, then the placement is applied
// here. Optimizer states and fp32 master weights live where --offload-optimizer
// says, and their update runs on the host when that is not the GPU; the
// weights the forward and backward passes read live where --offload-params
// says. When the two differ, the compute weights are a copy (State) of the
// master refreshed after each update: the mixed-precision copy when there is
// one, else a new fp32 copy. insert-transfers then moves whatever a node
// needs into the tier it runs in.
//
//===----------------------------------------------------------------------===//
#include "zinc/planning/Placement.h"
#include "zinc/passes/DelayedUpdate.h"
#include "zinc/passes/OptimizerOps.h"
#include "zinc/support/Error.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace zinc::planning {
namespace {

/// The distinct nodes reading `v`, in the order of its use list. A set, not
/// a search of the list so far: the loss-scaling flags have a use for
/// every update of the model.
llvm::SmallVector<ir::Node *, 4> usersOf(const ir::Value &v) {
  llvm::SmallVector<ir::Node *, 4> users;
  llvm::SmallPtrSet<const ir::Node *, 4> seen;
  for (const ir::Use &u : v.uses())
    if (seen.insert(u.user).second)
      users.push_back(u.user);
  return users;
}

/// How many distinct nodes read `v`, counted no further than 2: whether a
/// state belongs to one update or is shared. Asked for each state of each
/// update, so it must not walk a shared state's use list to the end.
unsigned distinctUsersUpToTwo(const ir::Value &v) {
  const ir::Node *first = nullptr;
  for (const ir::Use &u : v.uses()) {
    if (!first)
      first = u.user;
    else if (u.user != first)
      return 2;
  }
  return first ? 1 : 0;
}

/// Where gradient accumulators (--grad-accum) live: with the optimizer's
/// states, except that with the states on NVMe they stay in CPU memory when
/// all of them take at most half of it: every micro-batch reads and writes
/// them, while the states move once per step.
ir::Tier gradientAccumulatorTier(llvm::ArrayRef<ir::Node *> optimizers,
                                 const MemoryOptions &mem) {
  if (mem.optimizerTier != ir::Tier::Nvme)
    return mem.optimizerTier;
  uint64_t bytes = 0;
  for (const ir::Node *opt : optimizers)
    if (const ir::Value *grad = opt->inputs[1];
        grad && grad->role == ir::ValueRole::State)
      bytes += grad->byteSize();
  bool fits = mem.cpuCapacity == 0 || bytes <= mem.cpuCapacity / 2;
  return fits ? ir::Tier::Cpu : ir::Tier::Nvme;
}

} // namespace

llvm::Expected<bool> applyPlacement(ir::Graph &g, const MemoryOptions &mem) {
  bool training = llvm::any_of(
      g.nodes(), [](const auto &n) { return isOptimizerNode(*n); });
  if (training && mem.optimizerTier == ir::Tier::Gpu &&
      mem.paramsTier != ir::Tier::Gpu)
    return makeError(
        "--offload-params=" + ir::tierName(mem.paramsTier) +
        " needs the optimizer off the GPU too (--offload-optimizer=cpu "
        "or nvme): its fp32 master weights would otherwise stay in GPU memory");
  std::vector<ir::Node *> optimizers;
  for (const auto &n : g.nodes())
    if (isOptimizerNode(*n))
      optimizers.push_back(n);

  bool changed = false;
  llvm::DenseSet<const ir::Value *> masters;
  const ir::Tier accumulatorTier = gradientAccumulatorTier(optimizers, mem);
  for (ir::Node *opt : optimizers) {
    if (mem.optimizerTier != ir::Tier::Gpu) {
      opt->stream = ir::Stream::Host;
      changed = true;
    }
    ir::Value *master = opt->inputs[0];
    masters.insert(master);
    master->tier = mem.optimizerTier;
    // States only this update touches (moments, momentum buffers) live with
    // the master; shared ones (loss-scaling flags) and the mixed-precision
    // copy are placed below.
    for (ir::Value *in : llvm::drop_begin(opt->inputs, 2))
      if (in && in->role == ir::ValueRole::State &&
          distinctUsersUpToTwo(*in) == 1)
        in->tier = mem.optimizerTier;
    // A gradient accumulator (--grad-accum): the micro-batches' gradients
    // are added into it where the update runs, and what reads it for
    // clipping reads it there.
    ir::Value *grad = opt->inputs[1];
    if (grad && grad->role == ir::ValueRole::State) {
      grad->tier = accumulatorTier;
      if (mem.optimizerTier != ir::Tier::Gpu)
        for (ir::Node *user : usersOf(*grad))
          if (user->domain == "zinc" && (user->opType == "AccumulateGrad" ||
                                         user->opType == "SumGradSquares"))
            user->stream = ir::Stream::Host;
    }
  }

  // The weights compute reads: the master itself, its mixed-precision copy,
  // or a new copy in the params tier. Readers after the update (ZeRO's
  // rebuild of the compute weights from the updated shards) read what the
  // update just wrote, wherever it is; the others need it in the params tier.
  llvm::DenseMap<const ir::Node *, size_t> ordinal;
  for (ir::Node *n : g.nodes())
    ordinal[n] = ordinal.size();
  for (ir::Node *opt : optimizers) {
    ir::Value *master = opt->inputs[0];
    // Stage 3 of ZeRO gathers the master itself on the collective stream:
    // that is compute reading it too.
    bool readByCompute = llvm::any_of(usersOf(*master), [&](ir::Node *n) {
      return n != opt && ordinal.lookup(n) < ordinal.lookup(opt) &&
             (n->stream == ir::Stream::Compute ||
              n->stream == ir::Stream::Collective);
    });
    for (ir::Value *in : llvm::drop_begin(opt->inputs, 2))
      if (in && in->role == ir::ValueRole::State &&
          distinctUsersUpToTwo(*in) > 1 && in->shape == master->shape &&
          in->dtype != DType::F32)
        in->tier = mem.paramsTier; // The mixed-precision copy.
    // A delayed update writes the master while compute reads the weights
    // of the step before: they need a copy of their own.
    if (!readByCompute ||
        (mem.paramsTier == mem.optimizerTier && !mem.delayUpdates))
      continue;
    ir::Value *copy =
        g.addValue(g.uniqueValueName(master->name + "." +
                                     ir::tierName(mem.paramsTier).str()),
                   master->dtype, master->shape, ir::ValueRole::State);
    copy->init = master->init; // Loaded with the same initial weights.
    copy->shardOf = master->shardOf;
    copy->tier = mem.paramsTier;
    for (ir::Node *user : usersOf(*master))
      if (user != opt && ordinal.lookup(user) < ordinal.lookup(opt))
        user->replaceUsesOfWith(master, copy);
    g.insertNode(g.nextNode(opt), "CopyInto",
                 g.uniqueNodeName(master->name + "/refresh"), {master, copy},
                 {}, {}, "zinc");
    changed = true;
  }
  // Compute weights no update writes itself (ZeRO stages 1 and 2 rebuild
  // them whole from the ranks' updated shards) live with the others.
  for (const auto &v : g.values())
    if (v->role == ir::ValueRole::State && v->init && !masters.count(v.get()) &&
        llvm::none_of(usersOf(*v),
                      [](ir::Node *n) { return isOptimizerNode(*n); }) &&
        v->tier != mem.paramsTier) {
      v->tier = mem.paramsTier;
      changed = true;
    }
  // Weights nobody trains (frozen) live with the compute weights.
  for (const auto &v : g.values())
    if (v->role == ir::ValueRole::Parameter && !masters.count(v.get()) &&
        v->tier != mem.paramsTier) {
      v->tier = mem.paramsTier;
      changed = true;
    }
  // Model state (BatchNorm running statistics) is read and updated by
  // compute nodes, like the weights: it lives with them.
  for (const auto &v : g.values())
    if (v->role == ir::ValueRole::ModelState && v->tier != mem.paramsTier) {
      v->tier = mem.paramsTier;
      changed = true;
    }
  if (training && mem.delayUpdates) {
    bool spread =
        mem.delayedUpdatePlacement == DelayedUpdatePlacement::Auto
            ? mem.spreadDelayedUpdates
            : mem.delayedUpdatePlacement == DelayedUpdatePlacement::Spread;
    if (auto err =
            passes::delayUpdates(g, spread ? DelayedUpdatePlacement::Spread
                                           : DelayedUpdatePlacement::AtStart))
      return err;
    changed = true;
  }
  return changed || mem.optimizerTier != ir::Tier::Gpu;
}

} // namespace zinc::planning
