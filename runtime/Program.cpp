//===- Program.cpp - Plan to memory: arenas, tensor views, kernels --------===//
#include "zinc/runtime/Program.h"
#include "zinc/ops/KernelWorkspace.h"
#include "zinc/plan/PlanNames.h"
#include "zinc/plan/PlanPaths.h"
#include "zinc/plan/PlanVerifier.h"
#include "zinc/runtime/HostMemory.h"
#include "zinc/runtime/WeightLoader.h"
#include "zinc/runtime/comm/Communicator.h"
#include "zinc/runtime/storage/AlignedBuffer.h"
#include "zinc/support/Error.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MathExtras.h"
#include <cerrno>
#include <chrono>
#include <cstring>
#include <sys/mman.h>

namespace zinc::rt {

static constexpr uint64_t kPage = 4096;

Arena::~Arena() {
  if (data)
    ::munmap(data, mappedBytes);
}

llvm::Error Arena::allocate(uint64_t capacity, uint64_t usable,
                            llvm::StringRef tierName, bool hugePages) {
  uint64_t open = llvm::alignTo(std::max<uint64_t>(usable, 1), kPage);
  // One guard page past the reservation catches runs off its end too.
  uint64_t mapped = llvm::alignTo(std::max(capacity, open), kPage) + kPage;
  // Huge pages need a 2 MiB-aligned base: reserve the slack and trim it.
  uint64_t slack = hugePages ? storage::kHugePageBytes : 0;
  void *p = ::mmap(nullptr, mapped + slack, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    return makeError("cannot reserve the " + tierName + " tier's " +
                     llvm::Twine(mapped) + " bytes: " + std::strerror(errno));
  if (slack) {
    auto *raw = static_cast<uint8_t *>(p);
    uint64_t lead = (slack - reinterpret_cast<uintptr_t>(raw) % slack) % slack;
    if (lead)
      ::munmap(raw, lead);
    if (slack - lead)
      ::munmap(raw + lead + mapped, slack - lead);
    p = raw + lead;
  }
  if (::mprotect(p, open, PROT_READ | PROT_WRITE) != 0) {
    int saved = errno;
    ::munmap(p, mapped);
    return makeError("cannot allocate the " + tierName + " tier's " +
                     llvm::Twine(open) + " bytes: " + std::strerror(saved));
  }
  // Left untouched: anonymous pages read as zero, and the pages the steps
  // touch are what touchedBytes() measures (the first step pays their
  // first-touch faults; later steps touch the same pages). 4 KiB pages, so
  // that touching one byte maps one page, not 2 MiB, unless the arena feeds
  // O_DIRECT transfers: there huge pages double the NVMe tier's throughput
  // (storage::adviseHugePages says why), and the measurement, still of
  // memory really touched, is in 2 MiB steps. A system that refuses the
  // advice only changes the measurement's resolution, so that is no error.
  if (hugePages)
    storage::adviseHugePages(p, mapped);
  else
    (void)::madvise(p, mapped, MADV_NOHUGEPAGE);
  data = static_cast<uint8_t *>(p);
  usableBytes = open;
  mappedBytes = mapped;
  touchedPages = 0;
  return llvm::Error::success();
}

llvm::Expected<uint64_t> Arena::touchedBytes() const {
  // mincore's answer for up to this many pages at a time, on the stack.
  constexpr uint64_t kChunk = 4096;
  unsigned char resident[kChunk];
  for (uint64_t hi = usableBytes / kPage; hi > touchedPages;) {
    uint64_t lo = hi - std::min(kChunk, hi - touchedPages);
    if (::mincore(data + lo * kPage, (hi - lo) * kPage, resident) != 0)
      return makeError(llvm::Twine("cannot read which arena pages were "
                                   "touched: mincore: ") +
                       std::strerror(errno));
    for (uint64_t i = hi - lo; i-- > 0;)
      if (resident[i] & 1) {
        touchedPages = lo + i + 1;
        return touchedPages * kPage;
      }
    hi = lo;
  }
  return touchedPages * kPage;
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

namespace {
/// A tier as the plan describes it, and how far its tensors reach.
struct TierLayout {
  bool described = false;
  bool used = false;
  uint64_t capacity = 0;
  uint64_t peak = 0;
  uint64_t alignment = 64;
  uint64_t reach = 0;
};
} // namespace

/// Bytes the plan keeps in the NVMe tier: its proven peak, or how far its
/// tensors reach where the plan does not describe the tier.
static uint64_t nvmeBytes(const plan::Plan &plan) {
  uint64_t reach = 0;
  bool any = false;
  for (const plan::Tensor &t : plan.tensors())
    if (t.tier() == plan::TIER_NVME) {
      any = true;
      reach =
          std::max(reach, t.offset() + std::max<uint64_t>(t.size_bytes(), 1));
    }
  if (!any)
    return 0;
  for (const plan::TierInfo &info : plan.tiers())
    if (info.tier() == plan::TIER_NVME)
      return std::max(info.peak(), reach);
  return reach;
}

llvm::Error checkNvmeDir(const plan::Plan &plan, const LoadOptions &opts) {
  uint64_t bytes = nvmeBytes(plan);
  if (bytes && opts.nvmeDir.empty())
    return makeError("the plan keeps " + llvm::Twine(bytes) +
                     " bytes in the NVMe tier; give --nvme-dir=DIR");
  return llvm::Error::success();
}

llvm::Expected<std::unique_ptr<Program>>
Program::load(llvm::StringRef planPath, const LoadOptions &opts) {
  auto plan = plan::readPlanFile(planPath);
  if (!plan)
    return plan.takeError();
  return fromPlanChecked(std::move(*plan), opts, planPath);
}

llvm::Expected<std::unique_ptr<Program>>
Program::fromPlanChecked(plan::Plan plan, const LoadOptions &opts,
                         llvm::StringRef what) {
  if (auto err = plan::verifyPlanPaths(plan))
    return addContext(std::move(err), what);
  // About the command line, not the plan: no file prefix.
  if (auto err = checkNvmeDir(plan, opts))
    return err;
  if (auto err = checkRanks(plan, opts))
    return err;
  // Before an arena is reserved or a weight read: the reservations succeed
  // whatever their size, and the OOM killer would end the run in step 0.
  if (auto err = checkHostMemory(hostMemoryNeed(plan, opts.gpuTierInHostMemory),
                                 hostMemoryLimit()))
    return addContext(std::move(err), what);
  auto prog = create(std::move(plan), opts, /*verify=*/true);
  if (!prog)
    return addContext(prog.takeError(), what);
  return prog;
}

llvm::Expected<std::unique_ptr<Program>>
Program::fromPlan(plan::Plan source, const LoadOptions &opts) {
  return create(std::move(source), opts, /*verify=*/false);
}

llvm::Expected<std::unique_ptr<Program>>
Program::create(plan::Plan source, const LoadOptions &opts, bool verify) {
  std::unique_ptr<Program> prog(new Program());
  prog->plan = std::move(source);
  prog->comm = opts.comm;
  // Everything the loader indexes, sizes or maps from here on (tiers,
  // tensors, operands, streams, events, workspaces) is what the verifier
  // proves well formed; fromPlan's callers vouch for it instead.
  if (verify)
    if (auto err = plan::verifyPlan(prog->plan))
      return err;
  if (auto err = prog->layOut(opts))
    return err;
  if (auto err = prog->prepare())
    return err;
  auto weightsStart = std::chrono::steady_clock::now();
  if (auto err = prog->loadWeights(opts))
    return err;
  prog->weightSeconds = std::chrono::duration<double>(
                            std::chrono::steady_clock::now() - weightsStart)
                            .count();
  return prog;
}

llvm::Error Program::layOut(const LoadOptions &opts) {
  TierLayout tiers[3];
  for (const plan::TierInfo &info : plan.tiers()) {
    TierLayout &l = tiers[info.tier()];
    l.described = true;
    l.capacity = info.capacity();
    l.peak = info.peak();
    l.alignment = info.alignment() ? info.alignment() : 64;
  }

  tensors.resize(plan.tensors_size());
  places.resize(plan.tensors_size());
  for (int i = 0; i < plan.tensors_size(); ++i) {
    const plan::Tensor &t = plan.tensors(i);
    cpu::TensorRef &ref = tensors[i];
    ref.dtype = static_cast<DType>(t.dtype());
    ref.shape.assign(t.shape().begin(), t.shape().end());
    if (t.shard_of_size()) {
      // One rank's padded share of the whole tensor (the loader reads the
      // whole initializer, saving weights gathers it).
      llvm::SmallVector<int64_t, 4> whole(t.shard_of().begin(), t.shard_of().end());
      unsigned ranks = std::max(1u, plan.ranks());
      bool fits = ranks > 1 && ranks <= kMaxRanks && ref.shape.size() == 1 &&
                  llvm::all_of(whole, [](int64_t d) { return d >= 0; }) &&
                  fitsTensorBytes(whole, dtypeSize(ref.dtype)) &&
                  ref.shape[0] == shardElements(numElements(whole), ranks);
      if (!fits)
        return makeError("corrupt plan: tensor '" + t.name() + "' " +
                         formatShape(ref.shape) + " is not one rank's shard of " +
                         formatShape(whole) + " over " + llvm::Twine(ranks) + " ranks");
    }
    TierLayout &l = tiers[t.tier()];
    TensorPlace &place = places[i];
    place.tier = t.tier();
    place.offset = t.offset();
    place.extent =
        llvm::alignTo(std::max<uint64_t>(t.size_bytes(), 1), l.alignment);
    l.used = true;
    l.reach = std::max(l.reach, t.offset() + place.extent);
  }

  // A verified plan describes every tier it uses, and its tensors lie
  // inside each one's peak; fromPlan's hand-written plans may leave a tier
  // undescribed, which then holds what its tensors reach.
  for (TierLayout &l : tiers)
    if (!l.described)
      l.peak = l.reach;

  // The GPU arena is always there (the old single-tier plans), bounded by
  // the tier's capacity; the CPU arena holds the tier's peak.
  TierLayout &g = tiers[plan::TIER_GPU];
  if (auto err = gpu.allocate(g.capacity ? g.capacity : g.peak, g.peak,
                              plan::tierName(plan::TIER_GPU)))
    return err;
  TierLayout &c = tiers[plan::TIER_CPU];
  TierLayout &n = tiers[plan::TIER_NVME];
  // NVMe transfers go straight between CPU-tier tensors and the file.
  if (c.used)
    if (auto err = cpu.allocate(c.peak, c.peak, plan::tierName(plan::TIER_CPU),
                                /*hugePages=*/n.used))
      return err;
  if (n.used) {
    if (n.alignment % kNvmeAlignment)
      return makeError("corrupt plan: the NVMe tier's alignment is " +
                       llvm::Twine(n.alignment) +
                       "; NVMe transfers need a multiple of " +
                       llvm::Twine(kNvmeAlignment));
    if (auto err = checkNvmeDir(plan, opts))
      return err;
    auto store = createNvmeStore(opts.nvmeDir, n.peak, opts.warn, opts.nvmeIo);
    if (!store)
      return store.takeError();
    nvmeStore = std::move(*store);
  }
  for (int i = 0; i < plan.tensors_size(); ++i) {
    const TensorPlace &p = places[i];
    if (p.tier == plan::TIER_GPU)
      tensors[i].data = gpu.base() + p.offset;
    else if (p.tier == plan::TIER_CPU)
      tensors[i].data = cpu.base() + p.offset;
  }
  return llvm::Error::success();
}

void Program::layOutWorkspaces() {
  for (const plan::Workspace &w : plan.workspaces())
    workspaces[w.stream()] = {static_cast<uint8_t *>(tensors[w.tensor()].data),
                              plan.tensors(w.tensor()).size_bytes()};
}

llvm::Error Program::giveWorkspace(PreparedInstruction &p,
                                   const std::string &where) {
  llvm::SmallVector<KernelOperand, 8> ins, outs;
  for (const cpu::TensorRef *t : p.inputs)
    ins.push_back(t ? KernelOperand{t->dtype, t->shape, true}
                    : KernelOperand{});
  for (const cpu::TensorRef *t : p.outputs)
    outs.push_back(t ? KernelOperand{t->dtype, t->shape, true}
                     : KernelOperand{});
  const plan::Instruction &inst = *p.source;
  uint64_t need = kernelWorkspaceBytes(
      inst.domain(), inst.op(), plan.opset_version(), ins, outs, p.attrs);
  if (!need)
    return llvm::Error::success();
  const StreamWorkspace &w = workspaces[p.stream];
  if (need > w.bytes) {
    std::string given = w.data ? std::to_string(w.bytes) + " bytes"
                               : "none (a plan from an older zinc-compile? "
                                 "compile it again)";
    return makeError(where + " needs " + llvm::Twine(need) +
                     " bytes of kernel workspace; the plan gives the " +
                     streamName(p.stream) + " stream " + given);
  }
  p.workspace = w.data;
  p.workspaceBytes = need;
  return llvm::Error::success();
}

llvm::Error Program::prepare() {
  std::vector<uint32_t> signalled(plan.num_events(), 0);
  uint64_t bounceBytes = 0;
  layOutWorkspaces();
  for (const plan::Instruction &inst : plan.instructions()) {
    std::string where = "node '" + inst.name() + "' (" + inst.op() + ")";
    PreparedInstruction p;
    p.source = &inst;
    p.stream = inst.stream();
    p.updateOnly = inst.update_only();
    p.effects = lookupOpEffects(inst.domain(), inst.op());
    if (!p.effects)
      return makeError("corrupt plan: " + where + ": zinc declares no op '" +
                       inst.op() + "' in its domain");
    bool isCopy = isTransferOp(inst.domain(), inst.op());

    if (isCopy) {
      // The verifier proved the operands (source, destination), their
      // equal sizes and the stream's direction between their tiers.
      bool into = inst.op() == "CopyInto";
      int src = inst.inputs(0), dst = into ? inst.inputs(1) : inst.outputs(0);
      const plan::Tensor &s = plan.tensors(src);
      if (src == dst)
        return makeError("corrupt plan: " + where + " copies '" + s.name() +
                         "' onto itself");
      plan::Tier from = places[src].tier, to = places[dst].tier;
      p.kind = InstructionKind::Copy;
      p.copyBytes = s.size_bytes();
      p.copySrc = static_cast<const uint8_t *>(tensors[src].data);
      p.copyDst = static_cast<uint8_t *>(tensors[dst].data);
      p.copyKind = p.stream == plan::STREAM_H2D   ? CopyKind::H2D
                   : p.stream == plan::STREAM_D2H ? CopyKind::D2H
                   : to == plan::TIER_NVME        ? CopyKind::NvmeWrite
                   : from == plan::TIER_NVME      ? CopyKind::NvmeRead
                                                  : CopyKind::Local;
      if (p.copyKind == CopyKind::NvmeRead ||
          p.copyKind == CopyKind::NvmeWrite) {
        int host = p.copyKind == CopyKind::NvmeRead ? dst : src;
        p.nvmeOffset =
            places[p.copyKind == CopyKind::NvmeRead ? src : dst].offset;
        // O_DIRECT moves whole sectors: straight to or from the tensor only
        // when it starts on a sector and its extent holds the last one,
        // else through the bounce buffer so no neighbour is overwritten.
        uint64_t span = alignUpToSector(std::max<uint64_t>(p.copyBytes, 1));
        p.nvmeDirect = places[host].offset % kNvmeAlignment == 0 &&
                       places[host].extent >= span;
        if (!p.nvmeDirect)
          bounceBytes = std::max(bounceBytes, span);
      }
    } else {
      // The verifier proved it runs on a kernel stream, on tensors of that
      // stream's tier.
      p.kernel = inst.domain().empty()     ? cpu::lookupKernel(inst.op())
                 : inst.domain() == "zinc" ? cpu::lookupZincKernel(inst.op())
                                           : nullptr;
      if (!p.kernel)
        return makeError(where + ": the cpu backend has no kernel for it");
      p.attrs = convertAttributes(inst);
      for (int id : inst.inputs())
        p.inputs.push_back(id < 0 ? nullptr : &tensors[id]);
      for (int id : inst.outputs())
        p.outputs.push_back(id < 0 ? nullptr : &tensors[id]);
      if (auto err = giveWorkspace(p, where))
        return err;
    }

    // A wait counts the signals of its event that precede it in plan order,
    // so running the streams concurrently orders exactly what running the
    // plan in order does (the verifier proved each event signalled once,
    // before its waits, so no wait hangs).
    for (uint32_t e : inst.wait_events())
      p.waits.push_back({e, signalled[e]});
    for (uint32_t e : inst.signal_events()) {
      ++signalled[e];
      p.signals.push_back(e);
    }
    prepared.push_back(std::move(p));
  }

  // NVMe initializers are staged through the bounce buffer as well.
  for (const plan::Tensor &t : plan.tensors())
    if (t.tier() == plan::TIER_NVME && t.has_init())
      bounceBytes = std::max(
          bounceBytes, alignUpToSector(std::max<uint64_t>(t.size_bytes(), 1)));
  if (bounceBytes)
    return bounce.allocate(bounceBytes, bounceBytes, "nvme staging",
                           /*hugePages=*/true);
  return llvm::Error::success();
}

llvm::Error Program::loadWeights(const LoadOptions &opts) {
  cpu::TensorRef staging;
  auto tensorOf = [&](int id) -> cpu::TensorRef & {
    if (places[id].tier != plan::TIER_NVME)
      return tensors[id];
    staging = tensors[id];
    staging.data = bounce.base();
    return staging;
  };
  auto loaded = [&](int id) -> llvm::Error {
    if (places[id].tier != plan::TIER_NVME)
      return llvm::Error::success();
    uint64_t bytes = plan.tensors(id).size_bytes();
    if (!bytes)
      return llvm::Error::success();
    uint64_t span = alignUpToSector(bytes);
    std::memset(bounce.base() + bytes, 0, span - bytes);
    if (auto err = nvmeStore->write(places[id].offset, bounce.base(), bytes))
      return addContext(std::move(err),
                        "initializer '" + plan.tensors(id).init().name() + "'");
    return llvm::Error::success();
  };
  std::string modelDir =
      opts.modelDir.empty() ? plan::compiledModelDir(plan) : opts.modelDir;
  if (!opts.randomInit)
    return loadInitializers(plan, modelDir, tensorOf, loaded, rank());
  // --init=random: what the generator does not fill (constants, frozen
  // parameters) still comes from the model.
  std::vector<RandomFillKind> kinds = classifyRandomInit(plan);
  if (auto err = loadInitializers(
          plan, modelDir, tensorOf, loaded, rank(), [&](const plan::Tensor &t) {
            return kinds[t.id()] == RandomFillKind::Model;
          }))
    return err;
  auto targets = planRandomInit(plan, rank());
  if (!targets)
    return targets.takeError();
  initSeed = opts.initSeed;
  for (const RandomInitTarget &target : *targets) {
    if (opts.deviceGeneratesGpuTier && places[target.tensor].tier == plan::TIER_GPU) {
      pendingDeviceInit.push_back(target);
      continue;
    }
    fillRandomInit(target, tensorOf(target.tensor), opts.initSeed);
    if (auto err = loaded(target.tensor))
      return err;
  }
  return llvm::Error::success();
}

/// A zeroed buffer of its own holding an NVMe tensor's whole sectors: used
/// between steps (saving weights, checkpoints, tests), so it shares no
/// staging with the executor, and the tail sector's padding is zeros.
static llvm::Expected<storage::AlignedBuffer>
sectorBuffer(uint64_t bytes, const plan::Tensor &t, llvm::StringRef what) {
  auto buffer = storage::AlignedBuffer::allocate(bytes);
  if (!buffer)
    return addContext(buffer.takeError(), llvm::Twine("cannot ") + what +
                                              " tensor '" + t.name() +
                                              "' in the NVMe tier");
  return buffer;
}

unsigned Program::rank() const { return comm ? comm->rank() : 0; }
unsigned Program::ranks() const { return comm ? comm->size() : 1; }

llvm::Error checkRanks(const plan::Plan &plan, const LoadOptions &opts) {
  unsigned planned = std::max(1u, plan.ranks());
  unsigned running = opts.comm ? opts.comm->size() : 1;
  if (planned == running)
    return llvm::Error::success();
  if (running == 1)
    return makeError("the plan was compiled for " + llvm::Twine(planned) +
                     " ranks (--ranks=" + llvm::Twine(planned) +
                     "): start it with mpirun -np " + llvm::Twine(planned) + " zinc-run ...");
  return makeError("the plan was compiled for " + llvm::Twine(planned) + " rank" +
                   (planned == 1 ? "" : "s") + " (--ranks=" + llvm::Twine(planned) +
                   ") but " + llvm::Twine(running) + " were started; compile it with --ranks=" +
                   llvm::Twine(running) + " or start " + llvm::Twine(planned));
}

llvm::Error Program::readNvmeTensor(int id, void *dst) const {
  assert(places[id].tier == plan::TIER_NVME && "not an NVMe tensor");
  uint64_t bytes = plan.tensors(id).size_bytes();
  if (!bytes)
    return llvm::Error::success();
  auto staging = sectorBuffer(bytes, plan.tensors(id), "read");
  if (!staging)
    return staging.takeError();
  if (auto err = nvmeStore->read(places[id].offset, staging->data(), bytes))
    return err;
  std::memcpy(dst, staging->data(), bytes);
  return llvm::Error::success();
}

llvm::Error Program::writeNvmeTensor(int id, const void *src) {
  assert(places[id].tier == plan::TIER_NVME && "not an NVMe tensor");
  uint64_t bytes = plan.tensors(id).size_bytes();
  if (!bytes)
    return llvm::Error::success();
  auto staging = sectorBuffer(bytes, plan.tensors(id), "write");
  if (!staging)
    return staging.takeError();
  std::memcpy(staging->data(), src, bytes);
  return nvmeStore->write(places[id].offset, staging->data(), bytes);
}

} // namespace zinc::rt
