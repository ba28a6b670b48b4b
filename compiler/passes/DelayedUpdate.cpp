//===- DelayedUpdate.cpp - ZeRO-Offload's delayed parameter update --------===//
//
// --dpu: the host's optimizer update of step i runs during the forward and
// backward of step i+1 instead of after them, so the GPU no longer waits for
// the CPU. Each update then applies the previous step's gradients, and the
// weights a forward reads are one update behind (ZeRO-Offload, section 5.2).
//
// Within one step's plan this is:
//   host, from the start   update(master, delayed gradient) -> new master
//                          (and the compute-precision copy, into a host
//                          state of its own: the weights compute reads stay
//                          untouched while it reads them)
//   compute, meanwhile     forward and backward with the compute weights
//   where the update was   the gradient is stored into the delayed gradient
//                          (after the update has read it: the plan's events
//                          order it), and the compute weights are refreshed
//                          from what the update wrote
// The delayed gradient and the next compute copy are persistent state, so a
// checkpoint carries them. The first step has no gradient to apply: the
// update's `delayed_steps` attribute makes the kernels skip steps up to it
// and count the steps after it from 1, as torch.optim counts its updates.
// Under fp16 loss scaling the overflow flag and the scale of the step that
// made the gradients are stored with them (loss_scale.*.delayed): the update
// skips and unscales what it applies by those, and its step count is the
// applied steps already counted (UpdateLossScale counted them a step ago).
//
//===----------------------------------------------------------------------===//
#include "zinc/passes/DelayedUpdate.h"
#include "zinc/passes/OptimizerOps.h"
#include "zinc/support/Error.h"
#include "llvm/ADT/DenseMap.h"

namespace zinc::passes {

/// The update's compute-precision copy operand (written in the same pass
/// as the master), or none.
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

/// The update's count of applied steps (fp16 loss scaling's last extra,
/// the only i64 operand), or -1.
static int appliedOperand(const ir::Node &opt) {
  for (unsigned i = 2; i < opt.inputs.size(); ++i)
    if (opt.inputs[i] && opt.inputs[i]->dtype == DType::I64)
      return static_cast<int>(i);
  return -1;
}

llvm::Error delayUpdates(ir::Graph &g) {
  std::vector<ir::Node *> updates;
  for (ir::Node *n : g.nodes())
    if (isOptimizerNode(*n))
      updates.push_back(n);
  if (updates.empty())
    return makeError("--dpu delays the optimizer's update, and this step has none "
                     "(--mode=train with an optimizer)");
  // Everything the moved updates read is persistent state, so they can run
  // first; they keep their relative order.
  ir::Node *top = g.firstNode();
  llvm::DenseMap<ir::Value *, ir::Value *> delayedScalars;
  for (ir::Node *opt : updates) {
    if (opt->stream != ir::Stream::Host)
      return makeError("--dpu overlaps the host's update with the next step's compute: "
                       "it needs the optimizer off the GPU (--offload-optimizer=cpu or nvme)");
    // fp16 loss scaling's extras (found_inf, scale, applied steps): the
    // update must judge and unscale the gradients it applies with the flag
    // and scale of the step that made them, stored with them.
    if (int applied = appliedOperand(*opt); applied >= 2) {
      for (int slot : {applied - 2, applied - 1}) {
        ir::Value *now = opt->inputs[slot];
        ir::Value *&then = delayedScalars[now];
        if (!then) {
          then = g.addValue(g.uniqueValueName(now->name + ".delayed"), now->dtype, now->shape,
                            ir::ValueRole::State);
          then->tier = ir::Tier::Cpu;
          g.insertNode(g.nextNode(opt), "CopyInto", g.uniqueNodeName(then->name + "/store"),
                       {now, then}, {}, {}, "zinc");
        }
        opt->setInput(slot, then);
      }
    }
    ir::Value *grad = opt->inputs[1];
    ir::Node *storeAt = g.nextNode(opt);
    ir::Value *delayed = g.addValue(g.uniqueValueName(grad->name + ".delayed"), grad->dtype,
                                    grad->shape, ir::ValueRole::State);
    delayed->tier = ir::Tier::Cpu; // Where the host update reads it.
    delayed->shardOf = grad->shardOf;
    opt->setInput(1, delayed);
    opt->attrs.set(makeIntAttr("delayed_steps", 1));
    // The compute copy the update used to write in place: now written into
    // a host state, copied to the compute weights after backward.
    if (int slot = copyOperand(*opt); slot >= 0) {
      ir::Value *weights = opt->inputs[slot];
      ir::Value *next = g.addValue(g.uniqueValueName(weights->name + ".next"), weights->dtype,
                                   weights->shape, ir::ValueRole::State);
      next->init = weights->init; // Step 1 skips its update: this is what it refreshes.
      next->shardOf = weights->shardOf;
      next->tier = ir::Tier::Cpu;
      opt->setInput(slot, next);
      g.insertNode(storeAt, "CopyInto", g.uniqueNodeName(weights->name + "/delayed_refresh"),
                   {next, weights}, {}, {}, "zinc");
    }
    g.insertNode(storeAt, "CopyInto", g.uniqueNodeName(delayed->name + "/store"),
                 {grad, delayed}, {}, {}, "zinc");
    if (opt != top)
      g.moveBefore(opt, top);
    else
      top = g.nextNode(opt);
  }
  return llvm::Error::success();
}

} // namespace zinc::passes
