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

/// The part of a tensor a kernel wrote: along `axis`, [begin, begin +
/// extent) of every slice (the whole tensor by default).
struct Written {
  int64_t axis = 0, begin = 0, extent = -1;
};

/// The first element of `t`'s written part that is not finite, and its
/// value.
llvm::Optional<std::pair<int64_t, double>>
firstNonFinite(const cpu::TensorRef &t, const Written &w = {}) {
  int64_t n = t.numElements();
  int64_t outer = 1, dim = 1, inner = 1;
  if (w.extent >= 0 && w.axis < t.rank()) {
    for (int64_t d = 0; d < t.rank(); ++d)
      (d < w.axis ? outer : d == w.axis ? dim : inner) *= t.shape[d];
  }
  auto scan = [&](auto load) -> llvm::Optional<std::pair<int64_t, double>> {
    if (w.extent < 0) {
      for (int64_t i = 0; i < n; ++i) {
        double v = load(i);
        if (!std::isfinite(v))
          return std::make_pair(i, v);
      }
      return llvm::None;
    }
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t a = w.begin; a < w.begin + w.extent && a < dim; ++a)
        for (int64_t k = 0; k < inner; ++k) {
          int64_t i = (o * dim + a) * inner + k;
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

/// What a tile writing its share of a wider output (concat-in-place's
/// outColumn / outChannel ops) wrote of `y`; the rest of y holds other
/// tiles' values, or nothing yet.
Written writtenShare(const plan::Instruction &source, const PreparedInstruction &inst,
                     const cpu::TensorRef &y) {
  Written w;
  for (const plan::Attribute &a : source.attrs()) {
    if (a.name() == "outColumn") {
      w.axis = y.rank() - 1;
      w.begin = a.i();
    } else if (a.name() == "outChannel") {
      w.axis = 1;
      w.begin = a.i();
    } else {
      continue;
    }
    // The share's width: the weight's output extent (GatherColumns' data
    // is [V, d]; a product's and a Conv's weight is input 1).
    const cpu::TensorRef *weight =
        source.op() == "GatherColumns" || source.op() == "GatherColumnsInto"
            ? (inst.inputs.empty() ? nullptr : inst.inputs[0])
            : (inst.inputs.size() > 1 ? inst.inputs[1] : nullptr);
    if (!weight || weight->rank() < 1)
      return Written{};
    if (source.op().rfind("ConvChannels", 0) == 0)
      w.extent = weight->shape[0];
    else if (source.op().rfind("GatherColumns", 0) == 0)
      w.extent = weight->shape.back();
    else {
      bool transB = false;
      for (const plan::Attribute &b : source.attrs())
        if (b.name() == "transB")
          transB = b.i() != 0;
      w.extent = weight->rank() >= 2 ? weight->shape[weight->rank() - (transB ? 2 : 1)]
                                     : 1;
    }
    return w;
  }
  return w;
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
    auto bad = firstNonFinite(*t, writtenShare(*inst.source, inst, *t));
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
