//===- PlanBuilder.h - Small plans built directly as protobuf -------------===//
//
// For programs that run plans they make themselves rather than compile:
// zinc-run --calibrate times the executor on synthetic plans, and the
// runtime's unit tests build their cases with it.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_PLAN_PLANBUILDER_H
#define ZINC_PLAN_PLANBUILDER_H

#include "Plan.pb.h"
#include "llvm/Support/MathExtras.h"
#include <algorithm>
#include <initializer_list>
#include <string>
#include <vector>

namespace zinc::plan {

/// Builds a plan by hand: tensors are placed one after another in their
/// tier (at the tier's alignment), and finish() records each tier's peak.
class PlanBuilder {
public:
  PlanBuilder() {
    plan.set_producer("unit test");
    plan.set_mode("train");
    plan.set_opset_version(17);
    plan.set_loss(-1);
  }

  /// Alignment of a tier's tensors (defaults: 64, NVMe 4096).
  void setAlignment(Tier tier, uint64_t alignment) {
    align[tier] = alignment;
  }
  void setGpuCapacity(uint64_t bytes) { gpuCapacity = bytes; }

  int tensor(const std::string &name, std::vector<int64_t> shape,
             Tier tier = TIER_GPU, int dtype = 1 /* FLOAT */,
             Role role = ROLE_ACTIVATION) {
    Tensor *t = plan.add_tensors();
    int id = plan.tensors_size() - 1;
    t->set_id(id);
    t->set_name(name);
    t->set_dtype(dtype);
    uint64_t n = 1;
    for (int64_t d : shape) {
      t->add_shape(d);
      n *= d;
    }
    uint64_t width = dtype == 10 /* FLOAT16 */ || dtype == 16 /* BFLOAT16 */
                         ? 2
                         : dtype == 7 /* INT64 */   ? 8
                           : dtype == 2 /* UINT8 */ || dtype == 9 /* BOOL */ ? 1
                                                    : 4;
    t->set_size_bytes(n * width);
    t->set_role(role);
    t->set_tier(tier);
    t->set_offset(cursor[tier]);
    cursor[tier] +=
        llvm::alignTo(std::max<uint64_t>(n * width, 1), align[tier]);
    return id;
  }

  /// A kernel workspace of `bytes` for `stream`, in the tier its kernels
  /// work in.
  int workspace(Stream stream, int64_t bytes) {
    int id =
        tensor("zinc.workspace." + std::to_string(stream), {bytes},
               stream == STREAM_HOST ? TIER_CPU : TIER_GPU,
               2 /* UINT8 */);
    Workspace *w = plan.add_workspaces();
    w->set_stream(stream);
    w->set_tensor(id);
    return id;
  }

  Instruction &add(const std::string &name, const std::string &op,
                         std::initializer_list<int> inputs,
                         std::initializer_list<int> outputs,
                         Stream stream = STREAM_COMPUTE,
                         std::initializer_list<uint32_t> waits = {},
                         std::initializer_list<uint32_t> signals = {}) {
    Instruction *inst = plan.add_instructions();
    inst->set_name(name);
    if (op == "Copy" || op == "CopyInto" || op == "AdamW")
      inst->set_domain("zinc");
    inst->set_op(op);
    for (int id : inputs)
      inst->add_inputs(id);
    for (int id : outputs)
      inst->add_outputs(id);
    inst->set_stream(stream);
    for (uint32_t e : waits) {
      inst->add_wait_events(e);
      events = std::max(events, e + 1);
    }
    for (uint32_t e : signals) {
      inst->add_signal_events(e);
      events = std::max(events, e + 1);
    }
    return *inst;
  }

  Plan finish() {
    Plan out = plan;
    out.set_num_events(events);
    for (int tier = 0; tier < 3; ++tier) {
      if (!cursor[tier] && tier != TIER_GPU)
        continue;
      TierInfo *info = out.add_tiers();
      info->set_tier(static_cast<Tier>(tier));
      info->set_peak(cursor[tier]);
      info->set_alignment(align[tier]);
      if (tier == TIER_GPU)
        info->set_capacity(gpuCapacity);
    }
    return out;
  }

  Plan plan;

private:
  uint64_t cursor[3] = {0, 0, 0};
  uint64_t align[3] = {64, 64, 4096};
  uint64_t gpuCapacity = 0;
  uint32_t events = 0;
};

} // namespace zinc::plan

#endif
