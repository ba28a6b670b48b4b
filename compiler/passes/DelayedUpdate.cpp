//===- DelayedUpdate.cpp - ZeRO-Offload's delayed parameter update --------===//
//
// --dpu: the host's optimizer update of step i runs during the forward and
// backward of step i+1 instead of after them, so the GPU no longer waits for
// the CPU. Each update then applies the previous step's gradients, and the
// weights a forward reads are one update behind (ZeRO-Offload, section 5.2).
//
// Within one step's plan this is:
//   compute                forward and backward, with the weights as the
//                          previous step left them
//   host, during the step  the updates (master, delayed gradient), in their
//                          order, either all at the start of the step or
//                          spread evenly over its compute (plan-memory simulates
//                          both and keeps the faster: at the start the host
//                          work overlaps the most compute, but its NVMe
//                          traffic queues ahead of the forward pass's
//                          prefetches); either way the host work and its
//                          traffic share the step instead of following it;
//                          an update writes no weights compute still reads:
//                          the copy it refreshed in place is written into a
//                          host state of its own (`<copy>.next`)
//   refreshes              each copy of the compute weights (`/refresh`,
//                          `/delayed_refresh`) right after both its update
//                          and the last node of this step that reads them
//   where the update was   the gradient is stored into the delayed gradient
//                          (after the update has read it: the plan's events
//                          order it)
// The delayed gradients and next copies are persistent state, so a
// checkpoint carries them.
// The first step has no gradient to apply: the update's `delayed_steps`
// attribute makes the kernels skip steps up to it and count the steps after
// it from 1, as torch.optim counts its updates. Under fp16 loss scaling the
// overflow flag and the scale of the step that made the gradients are
// stored with them (loss_scale.*.delayed): the update skips and unscales
// what it applies by those, and its step count is the applied steps already
// counted (UpdateLossScale counted them a step ago). Gradient clipping's
// sum of squares is stored with them too (grad_norm.sum_squares.delayed),
// after its all-reduce: the update clips what it applies by that step's norm,
// and this step's backward sums its own squares without waiting for the
// host's updates to have read the last step's.
//
//===----------------------------------------------------------------------===//
#include "zinc/passes/DelayedUpdate.h"
#include "zinc/passes/OptimizerOps.h"
#include "zinc/support/Error.h"
#include "llvm/ADT/DenseMap.h"

namespace zinc::passes {

/// The update's count of applied steps (fp16 loss scaling's last extra,
/// the only i64 operand), or -1.
static int appliedOperand(const ir::Node &opt) {
  for (unsigned i = 2; i < opt.inputs.size(); ++i)
    if (opt.inputs[i] && opt.inputs[i]->dtype == DType::I64)
      return static_cast<int>(i);
  return -1;
}

/// The update's compute-precision copy operand (written in the same pass
/// as the master), or -1.
static int copyOperand(const ir::Node &opt) {
  const ir::Value *master = opt.inputs[0];
  for (unsigned i = 2; i < opt.inputs.size(); ++i) {
    const ir::Value *in = opt.inputs[i];
    if (in && in->role == ir::ValueRole::State && in->shape == master->shape &&
        in->dtype != DType::F32 && opt.writesInput(i))
      return static_cast<int>(i);
  }
  return -1;
}

/// The update and the copies right after it that refresh the compute
/// weights from what it wrote (the planner's `/refresh`): they move together.
static std::vector<ir::Node *> updateGroup(ir::Graph &g, ir::Node *opt) {
  std::vector<ir::Node *> group{opt};
  for (ir::Node *n = g.nextNode(opt);
       n && n->domain == "zinc" && n->opType == "CopyInto" && n->inputs[0] == opt->inputs[0];
       n = g.nextNode(n))
    group.push_back(n);
  return group;
}

llvm::Error delayUpdates(ir::Graph &g, DelayedUpdatePlacement where) {
  std::vector<ir::Node *> updates;
  llvm::DenseMap<const ir::Node *, size_t> position;
  for (ir::Node *n : g.nodes()) {
    position[n] = position.size();
    if (isOptimizerNode(*n))
      updates.push_back(n);
  }
  if (updates.empty())
    return makeError("--dpu delays the optimizer's update, and this step has none "
                     "(--mode=train with an optimizer)");
  // Where each update goes: before everything, or its share of the compute
  // before the first one.
  ir::Node *first = g.firstNode();
  std::vector<ir::Node *> compute;
  for (ir::Node *n : g.nodes()) {
    if (n == updates.front())
      break;
    if (n->stream == ir::Stream::Compute)
      compute.push_back(n);
  }
  llvm::DenseMap<ir::Value *, ir::Value *> delayedScalars;
  for (size_t index = 0; index < updates.size(); ++index) {
    ir::Node *opt = updates[index];
    if (opt->stream != ir::Stream::Host)
      return makeError("--dpu overlaps the host's update with the next step's compute: "
                       "it needs the optimizer off the GPU (--offload-optimizer=cpu or nvme)");
    std::vector<ir::Node *> refreshes = updateGroup(g, opt);
    refreshes.erase(refreshes.begin());
    ir::Node *storeAt = g.nextNode(refreshes.empty() ? opt : refreshes.back());
    // fp16 loss scaling's extras (found_inf, scale, applied steps): the
    // update must judge and unscale the gradients it applies with the flag
    // and scale of the step that made them, stored with them.
    // A step's scalar the update reads, kept for the next step's update:
    // one host state per scalar, stored where the first update was.
    auto storedForNextStep = [&](ir::Value *now) {
      ir::Value *&then = delayedScalars[now];
      if (!then) {
        then = g.addValue(g.uniqueValueName(now->name + ".delayed"), now->dtype, now->shape,
                          ir::ValueRole::State);
        then->tier = ir::Tier::Cpu;
        g.insertNode(storeAt, "CopyInto", g.uniqueNodeName(then->name + "/store"),
                     {now, then}, {}, {}, "zinc");
      }
      return then;
    };
    if (int applied = appliedOperand(*opt); applied >= 2)
      for (int slot : {applied - 2, applied - 1})
        opt->setInput(slot, storedForNextStep(opt->inputs[slot]));
    // --clip-grad-norm's sum of squares, the same way.
    unsigned sumSlot = optimizerExtraOperand(*opt, OptimizerExtra::GradSumSquares);
    if (sumSlot < opt->inputs.size() && opt->inputs[sumSlot])
      opt->setInput(sumSlot, storedForNextStep(opt->inputs[sumSlot]));
    ir::Value *grad = opt->inputs[1];
    ir::Value *delayed = g.addValue(g.uniqueValueName(grad->name + ".delayed"), grad->dtype,
                                    grad->shape, ir::ValueRole::State);
    delayed->tier = ir::Tier::Cpu; // Where the host update reads it.
    delayed->shardOf = grad->shardOf;
    opt->setInput(1, delayed);
    opt->attrs.set(makeIntAttr("delayed_steps", 1));
    g.insertNode(storeAt, "CopyInto", g.uniqueNodeName(delayed->name + "/store"),
                 {grad, delayed}, {}, {}, "zinc");
    // The compute copy the update refreshed in place: written into a host
    // state of its own, refreshed from it below.
    if (int slot = copyOperand(*opt); slot >= 0) {
      ir::Value *weights = opt->inputs[slot];
      ir::Value *next = g.addValue(g.uniqueValueName(weights->name + ".next"), weights->dtype,
                                   weights->shape, ir::ValueRole::State);
      next->init = weights->init; // Step 1 skips its update: this is what it refreshes.
      next->shardOf = weights->shardOf;
      next->tier = ir::Tier::Cpu;
      opt->setInput(slot, next);
      refreshes.push_back(g.insertNode(storeAt, "CopyInto",
                                       g.uniqueNodeName(weights->name + "/delayed_refresh"),
                                       {next, weights}, {}, {}, "zinc"));
    }

    bool atStart = where == DelayedUpdatePlacement::AtStart || compute.empty();
    ir::Node *target =
        atStart ? first : compute[index * compute.size() / updates.size()];
    g.moveBefore(opt, target);
    size_t updateAt = position.lookup(target);
    size_t limit = position.lookup(opt);
    for (ir::Node *refresh : refreshes) {
      // After the last node before the update's old place that touches the
      // weights it writes, unless the update itself comes later.
      ir::Node *last = nullptr;
      ir::Value *weights = refresh->inputs[1];
      auto consider = [&](ir::Node *n) {
        if (n && n != refresh && position.count(n) && position.lookup(n) < limit &&
            (!last || position.lookup(n) > position.lookup(last)))
          last = n;
      };
      consider(weights->def);
      for (const ir::Use &u : weights->uses())
        consider(u.user);
      if (!last || position.lookup(last) < updateAt)
        g.moveBefore(refresh, target);
      else
        g.moveBefore(refresh, g.nextNode(last));
    }
  }
  return llvm::Error::success();
}

} // namespace zinc::passes
