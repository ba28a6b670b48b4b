//===- Program.cpp - Plan to memory: arenas, tensor views, kernels --------===//
#include "zinc/runtime/Program.h"
#include "zinc/runtime/WeightLoader.h"
#include "zinc/support/Error.h"
#include "llvm/Support/MathExtras.h"
#include <cstring>

namespace zinc::rt {

llvm::Error Arena::allocate(uint64_t n) {
  uint64_t rounded = llvm::alignTo(std::max<uint64_t>(n, 64), 64);
  auto *p = static_cast<uint8_t *>(std::aligned_alloc(64, rounded));
  if (!p)
    return makeError("cannot allocate an arena of " + llvm::Twine(rounded) +
                     " bytes");
  // Touch every page now, so the step never pays for first-touch faults and
  // uninitialised arena bytes never leak into results.
  std::memset(p, 0, rounded);
  data.reset(p);
  bytes = rounded;
  return llvm::Error::success();
}

static AttributeList convertAttributes(const plan::Instruction &inst) {
  AttributeList list;
  for (const plan::Attribute &pa : inst.attrs()) {
    Attribute a;
    a.name = pa.name();
    switch (pa.kind()) {
    case plan::ATTR_INT: a.kind = AttrKind::Int; a.i = pa.i(); break;
    case plan::ATTR_FLOAT: a.kind = AttrKind::Float; a.f = pa.f(); break;
    case plan::ATTR_STRING: a.kind = AttrKind::String; a.s = pa.s(); break;
    case plan::ATTR_INTS:
      a.kind = AttrKind::Ints;
      a.ints.assign(pa.ints().begin(), pa.ints().end());
      break;
    case plan::ATTR_FLOATS:
      a.kind = AttrKind::Floats;
      a.floats.assign(pa.floats().begin(), pa.floats().end());
      break;
    case plan::ATTR_STRINGS:
      a.kind = AttrKind::Strings;
      a.strings.assign(pa.strings().begin(), pa.strings().end());
      break;
    case plan::ATTR_TENSOR: {
      a.kind = AttrKind::Tensor;
      a.tensor.dtype = static_cast<DType>(pa.tensor().dtype());
      a.tensor.shape.assign(pa.tensor().shape().begin(), pa.tensor().shape().end());
      const std::string &d = pa.tensor().data();
      a.tensor.bytes.assign(d.begin(), d.end());
      break;
    }
    default:
      break;
    }
    list.set(std::move(a));
  }
  return list;
}

llvm::Expected<std::unique_ptr<Program>> Program::load(llvm::StringRef planPath) {
  auto plan = plan::readPlanFile(planPath);
  if (!plan)
    return plan.takeError();
  auto prog = fromPlan(std::move(*plan));
  if (!prog)
    return addContext(prog.takeError(), planPath);
  return prog;
}

llvm::Expected<std::unique_ptr<Program>> Program::fromPlan(plan::Plan source) {
  std::unique_ptr<Program> prog(new Program());
  prog->plan = std::move(source);
  if (auto err = prog->layOut())
    return std::move(err);
  if (auto err = prog->prepare())
    return std::move(err);
  if (auto err = loadInitializers(prog->plan,
                                  [&](int id) -> cpu::TensorRef & {
                                    return prog->tensors[id];
                                  }))
    return std::move(err);
  return std::move(prog);
}

llvm::Error Program::layOut() {
  uint64_t gpuBytes = 0;
  for (const plan::Tensor &t : plan.tensors()) {
    if (!dtypeFromOnnx(t.dtype()))
      return makeError("tensor '" + t.name() + "' has unknown dtype code " +
                       llvm::Twine(t.dtype()));
    if (t.tier() != plan::TIER_GPU)
      return makeError("tensor '" + t.name() +
                       "' lives in a tier this runtime does not have yet");
    gpuBytes = std::max(gpuBytes, t.offset() + t.size_bytes());
  }
  for (const plan::TierInfo &tier : plan.tiers())
    if (tier.tier() == plan::TIER_GPU && tier.peak() < gpuBytes)
      return makeError("corrupt plan: tensors reach byte " + llvm::Twine(gpuBytes) +
                       " of the GPU tier but its proven peak is " +
                       llvm::Twine(tier.peak()));
  if (auto err = gpu.allocate(gpuBytes))
    return err;
  tensors.resize(plan.tensors_size());
  for (int i = 0; i < plan.tensors_size(); ++i) {
    const plan::Tensor &t = plan.tensors(i);
    if (t.id() != static_cast<uint32_t>(i))
      return makeError("corrupt plan: tensor ids are not dense");
    cpu::TensorRef &ref = tensors[t.id()];
    ref.dtype = static_cast<DType>(t.dtype());
    ref.shape.assign(t.shape().begin(), t.shape().end());
    if (ref.byteSize() != t.size_bytes())
      return makeError("corrupt plan: tensor '" + t.name() + "' size disagrees with its shape");
    ref.data = gpu.base() + t.offset();
  }
  return llvm::Error::success();
}

llvm::Error Program::prepare() {
  int numTensors = plan.tensors_size();
  auto checkId = [&](int id, const plan::Instruction &inst) -> llvm::Error {
    if (id < -1 || id >= numTensors)
      return makeError("corrupt plan: instruction '" + inst.name() +
                       "' names tensor " + llvm::Twine(id));
    return llvm::Error::success();
  };
  for (const plan::Instruction &inst : plan.instructions()) {
    PreparedInstruction p;
    p.source = &inst;
    p.kernel = inst.domain().empty()     ? cpu::lookupKernel(inst.op())
               : inst.domain() == "zinc" ? cpu::lookupZincKernel(inst.op())
                                         : nullptr;
    if (!p.kernel)
      return makeError("node '" + inst.name() + "' (" + inst.op() +
                       "): the cpu backend has no kernel for it");
    p.attrs = convertAttributes(inst);
    for (int id : inst.inputs()) {
      if (auto err = checkId(id, inst))
        return err;
      p.inputs.push_back(id < 0 ? nullptr : &tensors[id]);
    }
    for (int id : inst.outputs()) {
      if (auto err = checkId(id, inst))
        return err;
      p.outputs.push_back(id < 0 ? nullptr : &tensors[id]);
    }
    auto noteExtent = [&](int id) {
      if (id < 0)
        return;
      const plan::Tensor &t = plan.tensors(id);
      p.gpuHighWater = std::max(p.gpuHighWater, t.offset() + t.size_bytes());
    };
    for (int id : inst.inputs())
      noteExtent(id);
    for (int id : inst.outputs())
      noteExtent(id);
    prepared.push_back(std::move(p));
  }
  return llvm::Error::success();
}

} // namespace zinc::rt
