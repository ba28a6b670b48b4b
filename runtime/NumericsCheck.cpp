//===- NumericsCheck.cpp - zinc-run --check-numerics ----------------------===//
//
// After each kernel, every float tensor it wrote (its outputs and the inputs
// it updates in place) is scanned for NaN and infinities; the first one found
// stops the run, naming the node, the tensor, the element and the value. The
// step runs in plan order on one thread meanwhile (ExecutorOptions), so the
// first non-finite value in plan order is the one reported.
//
// With loss scaling, an overflow in the backward pass is expected (the
// scaler skips the step and lowers the scale, as GradScaler does), so only
// the forward pass, up to the instruction that produces the loss, is
// checked there.
//
//===----------------------------------------------------------------------===//
#include "ExecutorImpl.h"
#include "zinc/support/Float16.h"
#include <cmath>

namespace zinc::rt {

namespace {

/// The first element of `t` that is not finite, and its value.
llvm::Optional<std::pair<int64_t, double>>
firstNonFinite(const cpu::TensorRef &t) {
  int64_t n = t.numElements();
  auto scan = [&](auto load) -> llvm::Optional<std::pair<int64_t, double>> {
    for (int64_t i = 0; i < n; ++i) {
      double v = load(i);
      if (!std::isfinite(v))
        return std::make_pair(i, v);
    }
    return llvm::None;
  };
  switch (t.dtype) {
  case DType::F32:
    return scan([&](int64_t i) { return double(t.as<float>()[i]); });
  case DType::F64:
    return scan([&](int64_t i) { return t.as<double>()[i]; });
  case DType::F16:
    return scan(
        [&](int64_t i) { return double(halfToFloat(t.as<uint16_t>()[i])); });
  case DType::BF16:
    return scan(
        [&](int64_t i) { return double(bf16ToFloat(t.as<uint16_t>()[i])); });
  default:
    return llvm::None;
  }
}

} // namespace

unsigned lastCheckedInstruction(const Program &program) {
  const plan::Plan &plan = program.getPlan();
  unsigned count = plan.instructions_size();
  if (!plan.has_loss_scaling() || plan.loss() < 0)
    return count;
  for (unsigned i = 0; i < count; ++i)
    for (int id : plan.instructions(i).outputs())
      if (id == plan.loss())
        return i + 1;
  return count;
}

llvm::Error checkNumerics(const Program &program,
                          const PreparedInstruction &inst) {
  if (inst.kind != InstructionKind::Kernel)
    return llvm::Error::success();
  const plan::Plan &plan = program.getPlan();
  auto check = [&](int id, const cpu::TensorRef *t,
                   llvm::StringRef role) -> llvm::Error {
    if (id < 0 || !t || !t->data)
      return llvm::Error::success();
    auto bad = firstNonFinite(*t);
    if (!bad)
      return llvm::Error::success();
    const char *what = std::isnan(bad->second) ? "nan"
                       : bad->second > 0       ? "inf"
                                               : "-inf";
    return makeError(role + " '" + plan.tensors(id).name() +
                     "' holds a non-finite value (" + what + ") at element " +
                     llvm::Twine(bad->first) + " (--check-numerics)");
  };
  const plan::Instruction &source = *inst.source;
  for (unsigned k = 0; k < inst.outputs.size(); ++k)
    if (auto err = check(source.outputs(k), inst.outputs[k], "output"))
      return err;
  for (unsigned k = 0; k < inst.inputs.size(); ++k)
    if (inst.effects && inst.effects->writesInput(k))
      if (auto err = check(source.inputs(k), inst.inputs[k], "updated input"))
        return err;
  return llvm::Error::success();
}

} // namespace zinc::rt
