//===- PlanBuilder.h - Small plans of f32 vectors built as protobuf -------===//
#ifndef ZINC_TEST_UNIT_PLAN_PLANBUILDER_H
#define ZINC_TEST_UNIT_PLAN_PLANBUILDER_H

#include "zinc/plan/PlanVerifier.h"
#include "llvm/ADT/StringRef.h"
#include "gtest/gtest.h"
#include <algorithm>
#include <string>
#include <vector>

namespace zinc::plan::test {

/// Builds plans of f32 vectors. The GPU tier has a TierInfo from the start;
/// tier() adds or changes others.
struct PlanBuilder {
  Plan p;

  PlanBuilder() {
    p.set_mode("train");
    p.set_loss(-1);
    tier(TIER_GPU, 0, 1 << 20);
  }

  TierInfo &tier(Tier t, uint64_t capacity, uint64_t peak,
                 uint64_t alignment = 0) {
    TierInfo *info = nullptr;
    for (TierInfo &existing : *p.mutable_tiers())
      if (existing.tier() == t)
        info = &existing;
    if (!info)
      info = p.add_tiers();
    info->set_tier(t);
    info->set_capacity(capacity);
    info->set_peak(peak);
    info->set_alignment(alignment);
    return *info;
  }

  /// An f32[elements] tensor; returns its id.
  int tensor(const std::string &name, Tier tier, uint64_t offset,
             int64_t elements, Role role = ROLE_ACTIVATION) {
    Tensor *t = p.add_tensors();
    t->set_id(p.tensors_size() - 1);
    t->set_name(name);
    t->set_dtype(1);
    t->add_shape(elements);
    t->set_role(role);
    t->set_tier(tier);
    t->set_offset(offset);
    t->set_size_bytes(4 * elements);
    if (role == ROLE_INPUT)
      p.add_inputs(t->id());
    return t->id();
  }

  Instruction &inst(const std::string &name, const std::string &op,
                    Stream stream, std::vector<int> inputs,
                    std::vector<int> outputs, std::vector<uint32_t> waits = {},
                    std::vector<uint32_t> signals = {}) {
    Instruction *i = p.add_instructions();
    i->set_name(name);
    llvm::StringRef o(op);
    if (o.consume_front("zinc.")) {
      i->set_domain("zinc");
      i->set_op(o.str());
    } else {
      i->set_op(op);
    }
    i->set_stream(stream);
    for (int id : inputs)
      i->add_inputs(id);
    for (int id : outputs)
      i->add_outputs(id);
    for (uint32_t e : waits) {
      i->add_wait_events(e);
    }
    for (uint32_t e : signals) {
      i->add_signal_events(e);
      p.set_num_events(std::max(p.num_events(), e + 1));
    }
    return *i;
  }
};

/// The verifier's message for `plan`, or "" when it passes.
inline std::string verifyError(const Plan &plan) {
  llvm::Error err = verifyPlan(plan);
  return err ? llvm::toString(std::move(err)) : "";
}

} // namespace zinc::plan::test

#endif
