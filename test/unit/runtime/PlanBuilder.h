//===- PlanBuilder.h - Small multi-tier plans built directly as protobuf --===//
#ifndef ZINC_TEST_UNIT_RUNTIME_PLANBUILDER_H
#define ZINC_TEST_UNIT_RUNTIME_PLANBUILDER_H

#include "zinc/runtime/Executor.h"
#include "zinc/runtime/Program.h"
#include "llvm/Support/MathExtras.h"
#include <cstring>
#include <gtest/gtest.h>
#include <initializer_list>
#include <string>
#include <vector>

namespace zinc::rt::test {

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
  void setAlignment(plan::Tier tier, uint64_t alignment) {
    align[tier] = alignment;
  }
  void setGpuCapacity(uint64_t bytes) { gpuCapacity = bytes; }

  int tensor(const std::string &name, std::vector<int64_t> shape,
             plan::Tier tier = plan::TIER_GPU, int dtype = 1 /* FLOAT */,
             plan::Role role = plan::ROLE_ACTIVATION) {
    plan::Tensor *t = plan.add_tensors();
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
                           : dtype == 2 /* UINT8 */ ? 1
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
  int workspace(plan::Stream stream, int64_t bytes) {
    int id =
        tensor("zinc.workspace." + std::to_string(stream), {bytes},
               stream == plan::STREAM_HOST ? plan::TIER_CPU : plan::TIER_GPU,
               2 /* UINT8 */);
    plan::Workspace *w = plan.add_workspaces();
    w->set_stream(stream);
    w->set_tensor(id);
    return id;
  }

  plan::Instruction &add(const std::string &name, const std::string &op,
                         std::initializer_list<int> inputs,
                         std::initializer_list<int> outputs,
                         plan::Stream stream = plan::STREAM_COMPUTE,
                         std::initializer_list<uint32_t> waits = {},
                         std::initializer_list<uint32_t> signals = {}) {
    plan::Instruction *inst = plan.add_instructions();
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

  plan::Plan finish() {
    plan::Plan out = plan;
    out.set_num_events(events);
    for (int tier = 0; tier < 3; ++tier) {
      if (!cursor[tier] && tier != plan::TIER_GPU)
        continue;
      plan::TierInfo *info = out.add_tiers();
      info->set_tier(static_cast<plan::Tier>(tier));
      info->set_peak(cursor[tier]);
      info->set_alignment(align[tier]);
      if (tier == plan::TIER_GPU)
        info->set_capacity(gpuCapacity);
    }
    return out;
  }

  plan::Plan plan;

private:
  uint64_t cursor[3] = {0, 0, 0};
  uint64_t align[3] = {64, 64, 4096};
  uint64_t gpuCapacity = 0;
  uint32_t events = 0;
};

/// Loads `plan`, failing the test on an error.
inline std::unique_ptr<Program> loadOrFail(plan::Plan plan,
                                           const LoadOptions &opts = {}) {
  auto program = Program::fromPlan(std::move(plan), opts);
  EXPECT_TRUE(static_cast<bool>(program))
      << llvm::toString(program.takeError());
  return program ? std::move(*program) : nullptr;
}

/// The error message of `result`, or "" if it succeeded.
template <typename T> std::string errorOf(llvm::Expected<T> result) {
  if (result)
    return "";
  return llvm::toString(result.takeError());
}

/// The message of `err`, or "" on success.
inline std::string messageOf(llvm::Error err) {
  return err ? llvm::toString(std::move(err)) : "";
}

inline std::vector<float> values(Program &program, int id) {
  const cpu::TensorRef &t = program.tensor(id);
  return std::vector<float>(t.as<float>(), t.as<float>() + t.numElements());
}

inline void setValues(Program &program, int id, float start, float stride) {
  cpu::TensorRef &t = program.tensor(id);
  for (int64_t i = 0; i < t.numElements(); ++i)
    t.as<float>()[i] = start + stride * static_cast<float>(i % 97);
}

/// Raw bytes of every tensor in host memory (GPU and CPU tiers).
inline std::vector<std::vector<uint8_t>> snapshot(Program &program) {
  std::vector<std::vector<uint8_t>> out;
  for (const plan::Tensor &t : program.getPlan().tensors()) {
    const cpu::TensorRef &ref = program.tensor(t.id());
    if (!ref.data) {
      out.emplace_back();
      continue;
    }
    auto *p = static_cast<const uint8_t *>(ref.data);
    out.emplace_back(p, p + ref.byteSize());
  }
  return out;
}

} // namespace zinc::rt::test

#endif
