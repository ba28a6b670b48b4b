//===- Place.cpp - place: the home tier of every persistent tensor --------===//
//
// Optimizer states and fp32 master weights live where --offload-optimizer
// says, and their update runs on the host when that is not the GPU; the
// weights the forward and backward passes read live where --offload-params
// says. When the two differ, the compute weights are a copy (State) of the
// master refreshed after each update: the mixed-precision copy when there is
// one, else a new fp32 copy. insert-transfers then moves whatever a node
// needs into the tier it runs in.
//
//===----------------------------------------------------------------------===//
#include "zinc/passes/OptimizerOps.h"
#include "zinc/passes/Pass.h"
#include "zinc/support/Error.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

namespace zinc::passes {
namespace {

class Place : public Pass {
public:
  llvm::StringRef getName() const override { return "Place Tensors in Tiers"; }
  llvm::StringRef getArgument() const override { return "place"; }
  llvm::Expected<bool> run(ir::Graph &g, PassContext &ctx) override;
};

/// Nodes using each value, in program order.
llvm::DenseMap<const ir::Value *, std::vector<ir::Node *>> usersOf(const ir::Graph &g) {
  llvm::DenseMap<const ir::Value *, std::vector<ir::Node *>> users;
  for (const auto &n : g.nodes())
    for (ir::Value *in : n->inputs)
      if (in && (users[in].empty() || users[in].back() != n.get()))
        users[in].push_back(n.get());
  return users;
}

/// The node right after `n` in program order, or null.
ir::Node *nextNode(const ir::Graph &g, const ir::Node *n) {
  auto nodes = g.nodes();
  for (size_t i = 0; i + 1 < nodes.size(); ++i)
    if (nodes[i].get() == n)
      return nodes[i + 1].get();
  return nullptr;
}

llvm::Expected<bool> Place::run(ir::Graph &g, PassContext &ctx) {
  const MemoryOptions &mem = ctx.memory;
  bool training = llvm::any_of(g.nodes(), [](const auto &n) { return isOptimizerNode(*n); });
  if (training && mem.optimizerTier == ir::Tier::Gpu && mem.paramsTier != ir::Tier::Gpu)
    return makeError("--offload-params=" + ir::tierName(mem.paramsTier) +
                     " needs the optimizer off the GPU too (--offload-optimizer=cpu "
                     "or nvme): its fp32 master weights would otherwise stay in GPU memory");
  auto users = usersOf(g);
  std::vector<ir::Node *> optimizers;
  for (const auto &n : g.nodes())
    if (isOptimizerNode(*n))
      optimizers.push_back(n.get());

  bool changed = false;
  llvm::DenseSet<const ir::Value *> masters;
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
      if (in && in->role == ir::ValueRole::State && users[in].size() == 1)
        in->tier = mem.optimizerTier;
  }

  // The weights compute reads: the master itself, its mixed-precision copy,
  // or a new copy in the params tier.
  for (ir::Node *opt : optimizers) {
    ir::Value *master = opt->inputs[0];
    bool readByCompute = llvm::any_of(users[master], [&](ir::Node *n) {
      return n != opt && n->stream == ir::Stream::Compute;
    });
    for (ir::Value *in : llvm::drop_begin(opt->inputs, 2))
      if (in && in->role == ir::ValueRole::State && users[in].size() > 1 &&
          in->shape == master->shape && in->dtype != DType::F32)
        in->tier = mem.paramsTier; // The mixed-precision copy.
    if (!readByCompute || mem.paramsTier == mem.optimizerTier)
      continue;
    ir::Value *copy = g.addValue(g.uniqueValueName(master->name + "." + ir::tierName(mem.paramsTier).str()),
                                 master->dtype, master->shape, ir::ValueRole::State);
    copy->init = master->init; // Loaded with the same initial weights.
    copy->tier = mem.paramsTier;
    for (ir::Node *user : users[master])
      if (user != opt)
        for (ir::Value *&in : user->inputs)
          if (in == master)
            in = copy;
    g.insertNode(nextNode(g, opt), "CopyInto",
                 g.uniqueNodeName(master->name + "/refresh"), {master, copy}, {},
                 {}, "zinc");
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
  return changed || mem.optimizerTier != ir::Tier::Gpu;
}

} // namespace

std::unique_ptr<Pass> createPlacePass() { return std::make_unique<Place>(); }

} // namespace zinc::passes
