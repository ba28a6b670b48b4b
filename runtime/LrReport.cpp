//===- LrReport.cpp - The learning rate each step's update uses
//------------===//
#include "zinc/runtime/LrReport.h"
#include "zinc/support/Error.h"

namespace zinc::rt {

/// The attributes a schedule reads, from the plan's form of them.
static AttributeList scheduleAttributes(const plan::Instruction &inst) {
  AttributeList list;
  for (const plan::Attribute &a : inst.attrs()) {
    if (a.kind() == plan::ATTR_FLOAT && a.name() == "lr")
      list.set(makeFloatAttr(a.name(), a.f()));
    else if (a.kind() == plan::ATTR_STRING && a.name() == "lr_schedule")
      list.set(makeStringAttr(a.name(), a.s()));
    else if (a.kind() == plan::ATTR_INT &&
             (a.name() == "warmup_steps" || a.name() == "total_steps" ||
              a.name() == "delayed_steps"))
      list.set(makeIntAttr(a.name(), a.i()));
  }
  return list;
}

llvm::Error LrReport::open(Program &program, uint64_t firstStep) {
  const plan::Plan &plan = program.getPlan();
  for (const plan::Instruction &inst : plan.instructions()) {
    size_t states;
    if (inst.op() == "AdamW" || inst.op() == "Adam")
      states = 2;
    else if (inst.op() == "SGD")
      states = inst.inputs_size() > 2 ? 1 : 0;
    else
      continue;
    AttributeList attrs = scheduleAttributes(inst);
    auto s = lrScheduleFromAttrs(attrs);
    if (!s)
      return makeError("corrupt plan: update '" + inst.name() +
                       "': " + llvm::toString(s.takeError()));
    present = true;
    schedule = *s;
    baseLr = attrs.getFloat("lr", 1e-3);
    delayed = attrs.getInt("delayed_steps", 0);
    // (param, grad, states..., copy, found_inf, scale, applied_steps)
    size_t appliedAt = 2 + states + 3;
    if (static_cast<size_t>(inst.inputs_size()) > appliedAt &&
        inst.inputs(appliedAt) >= 0) {
      uint32_t id = inst.inputs(appliedAt);
      const cpu::TensorRef &t = program.tensor(id);
      if (program.place(id).tier == plan::TIER_NVME || t.dtype != DType::I64 ||
          t.numElements() != 1)
        return makeError("corrupt plan: update '" + inst.name() +
                         "' counts its steps in a tensor that is not an i64 "
                         "scalar in host memory");
      countsApplied = true;
      applied = *t.as<int64_t>();
    } else {
      applied = static_cast<int64_t>(firstStep) - delayed;
    }
    return llvm::Error::success();
  }
  return llvm::Error::success();
}

llvm::Optional<double> LrReport::rate() const {
  if (!present)
    return llvm::None;
  return baseLr * lrFactor(schedule, applied > 0 ? applied : 0);
}

void LrReport::stepDone(bool skipped) {
  if (!skipped)
    ++applied;
}

} // namespace zinc::rt
