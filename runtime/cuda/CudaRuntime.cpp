//===- CudaRuntime.cpp - Running a plan's GPU side on a CUDA device -------===//
//
// See CudaRuntime.h for what start-up makes. The executor's workers stay
// the cpu backend's (one per plan stream, event counts on the host); this
// file turns each instruction of a device stream into queued device work,
// and each plan event signalled by one into a CUDA event the waiting
// instruction's stream (or host thread) waits on.
//
//===----------------------------------------------------------------------===//
#include "zinc/runtime/cuda/CudaRuntime.h"
#include "kernels/ArenaWatermark.h"
#include "kernels/RandomInitKernel.h"
#include "zinc/plan/PlanNames.h"
#include "zinc/runtime/Executor.h"
#include "zinc/runtime/GradNorm.h"
#include "zinc/runtime/PinPlan.h"
#include "zinc/runtime/comm/Communicator.h"
#include "zinc/runtime/comm/DevicePlacement.h"
#include "zinc/runtime/cuda/CublasLtGemm.h"
#include "zinc/runtime/cuda/CudaCheck.h"
#include "zinc/runtime/cuda/CudaKernel.h"
#include "zinc/runtime/cuda/Device.h"
#include "zinc/runtime/cuda/NcclCommunicator.h"
#include "zinc/runtime/cuda/StagedCommunicator.h"
#include "zinc/support/Error.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringSet.h"
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <thread>

namespace zinc::cuda {
namespace {

using rt::PreparedInstruction;
using rt::Program;

bool isDeviceStream(plan::Stream s) {
  return s == plan::STREAM_COMPUTE || s == plan::STREAM_H2D ||
         s == plan::STREAM_D2H || s == plan::STREAM_COLLECTIVE;
}

/// Streams that run kernels, and so get a cuBLASLt context and scratch.
bool isKernelStream(plan::Stream s) {
  return s == plan::STREAM_COMPUTE || s == plan::STREAM_COLLECTIVE;
}

/// Deterministic ONNX ops the host may compute once at start-up when every
/// input is known then (Shape needs only its input's shape). The exporters
/// spell shape arithmetic and masks with these; running them on the GPU
/// every step would be launches for bytes that never change.
bool hostComputableOp(const plan::Instruction &inst) {
  static const llvm::StringSet<> ops = {
      "Constant", "ConstantOfShape", "Shape",     "Range",   "Cast",
      "Equal",    "Less",            "Greater",   "Not",     "And",
      "Where",    "Add",             "Sub",       "Mul",     "Div",
      "Neg",      "Unsqueeze",       "Squeeze",   "Reshape", "Concat",
      "Gather",   "Slice",           "Identity",  "Expand",  "Trilu",
      "Flatten",  "Sqrt",            "Reciprocal"};
  return inst.domain().empty() && ops.contains(inst.op());
}

/// Known values up to this size are handed to kernels in pinned memory.
constexpr uint64_t kHostReadableBytes = 4096;

bool persistentRole(plan::Role role) {
  return role == plan::ROLE_PARAMETER || role == plan::ROLE_CONSTANT ||
         role == plan::ROLE_STATE || role == plan::ROLE_MODEL_STATE;
}

/// What one instruction of a device stream does on the device.
struct DeviceInstruction {
  bool onDevice = false;
  cudaStream_t stream = nullptr;
  CudaKernelFn fn = nullptr;
  GemmContext *gemm = nullptr;
  void *scratch = nullptr;
  uint64_t scratchBytes = 0;
  llvm::SmallVector<const DeviceTensor *, 4> inputs;
  llvm::SmallVector<DeviceTensor *, 2> outputs;
  /// Computed at start-up: each output's bytes, from pinned memory.
  struct ConstantCopy {
    void *dst;
    const void *src;
    uint64_t bytes;
  };
  bool hostComputed = false;
  llvm::SmallVector<ConstantCopy, 1> constants;
  /// Copies: device or pinned host addresses, and the direction.
  void *copyDst = nullptr;
  const void *copySrc = nullptr;
  cudaMemcpyKind copyKind = cudaMemcpyDeviceToDevice;
  /// Recorded after its work when it signals a plan event.
  cudaEvent_t done = nullptr;
  /// The events of device instructions on other streams it waits for.
  llvm::SmallVector<cudaEvent_t, 2> waits;
};

class CudaRuntime final : public rt::ExecutionHooks {
public:
  explicit CudaRuntime(Program &program) : program(program) {}
  ~CudaRuntime() override {
    // Nothing to report to here; release errors only matter mid-run.
    for (void *chunk : pinnedChunks)
      (void)cudaHostUnregister(chunk);
  }

  llvm::Error start(const CudaRuntimeOptions &opts);

  llvm::Error beforeRun(const PreparedInstruction &inst) override;
  bool deviceReady(const PreparedInstruction &inst) override;
  llvm::Error run(PreparedInstruction &inst, unsigned index,
                  const rt::StepContext &ctx,
                  rt::TransferBytes &bytes) override;
  llvm::Error skip(const PreparedInstruction &inst, unsigned index) override;
  llvm::Error finishStep() override;
  llvm::Error finishInstruction(const PreparedInstruction &inst) override;
  llvm::Expected<uint64_t> measuredGpuPeak() override;
  llvm::Error inputsToDevice(llvm::ArrayRef<uint32_t> ids) override;
  llvm::Error stateToDevice() override;
  llvm::Error stateToHost() override;
  double pinSeconds() const override { return pinTime; }
  int deviceOrdinal() const override { return deviceIndex; }
  comm::Communicator *deviceCommunicator() override { return deviceComm.get(); }

private:
  unsigned indexOf(const PreparedInstruction &inst) const {
    return static_cast<unsigned>(&inst - program.instructions().data());
  }
  /// The device address of a host-mirror address in the GPU tier.
  void *deviceAddress(const void *mirror) const {
    return static_cast<uint8_t *>(planBase) +
           (static_cast<const uint8_t *>(mirror) - program.gpuArena().base());
  }
  bool inGpuMirror(const void *p) const {
    auto *b = static_cast<const uint8_t *>(p);
    return b >= program.gpuArena().base() &&
           b < program.gpuArena().base() + program.gpuArena().size();
  }
  llvm::Error checkKernels();
  /// Several ranks: this rank's device and how the ranks' collectives
  /// travel, agreed by every rank.
  llvm::Error placeRank(const CudaRuntimeOptions &opts, int deviceCount,
                        int &device, comm::CommKind &kind);
  /// Makes the device communicator on the collective stream.
  llvm::Error startCollectives(const CudaRuntimeOptions &opts, int device,
                               comm::CommKind kind);
  llvm::Error layOut(const CudaRuntimeOptions &opts);
  /// Page-locks what the device streams' copies touch in the CPU tier.
  llvm::Error pinCpuTier(int device);
  /// Generates Program::deviceInit()'s tensors in device memory.
  llvm::Error generateOnDevice();
  llvm::Error computeOnHost();
  /// Readers of tensor `id` get `pinned`, its value computed at start-up.
  void givePinned(uint32_t id, const void *pinned);
  llvm::Error prepareInstructions(const CudaRuntimeOptions &opts);
  /// Copies GPU-tier tensor `id` between the mirror and the device.
  llvm::Error copyTensor(uint32_t id, bool toDevice);

  Program &program;
  DeviceArena arena;
  void *planBase = nullptr;
  uint64_t planBytes = 0;
  unsigned long long *watermarkSlot = nullptr;
  uint64_t watermarkWords = 0;
  /// The CPU tier's page-locked chunks (PinPlan.h), and the time they took.
  std::vector<void *> pinnedChunks;
  double pinTime = 0;
  std::map<plan::Stream, Stream> streams;
  std::map<plan::Stream, std::unique_ptr<GemmContext>> gemms;
  std::map<plan::Stream, void *> scratch;
  uint64_t scratchBytes = 0;
  std::vector<DeviceTensor> tensors;
  std::vector<DeviceInstruction> device;
  std::vector<Event> events;
  llvm::DenseSet<unsigned> hostComputed;
  PinnedBuffer constants;
  /// Values known at start-up that kernels read from pinned memory.
  std::map<uint32_t, DeviceTensor> pinnedViews;
  /// Tensors the host reads after every step (loss, loss scaling, outputs).
  std::vector<uint32_t> readBack;
  bool allowTf32 = false;
  int deviceIndex = -1;
  /// Several ranks: the collectives' communicator over device memory.
  std::unique_ptr<comm::Communicator> deviceComm;
};

/// Sorts the kernel instructions of `program`'s device streams: those
/// start-up computes on the host go into `hostComputed`; an error names
/// every op that has no cuda kernel (and refuses plans of several ranks).
llvm::Error classifyKernels(Program &program,
                            llvm::DenseSet<unsigned> &hostComputed) {
  const plan::Plan &plan = program.getPlan();
  // Which tensors are known at start-up: constants' values are loaded,
  // and host-computable ops over known inputs make more.
  llvm::DenseSet<int> known;
  for (const plan::Tensor &t : plan.tensors())
    if (t.role() == plan::ROLE_CONSTANT && t.tier() == plan::TIER_GPU)
      known.insert(t.id());
  std::map<std::string, unsigned> missing;
  auto &prepared = program.instructions();
  for (unsigned i = 0; i < prepared.size(); ++i) {
    const PreparedInstruction &p = prepared[i];
    const plan::Instruction &inst = *p.source;
    if (!isKernelStream(p.stream) || p.kind != rt::InstructionKind::Kernel)
      continue;
    bool inputsKnown = inst.op() == "Shape" ||
                       llvm::all_of(inst.inputs(), [&](int id) {
                         return id < 0 || known.contains(id);
                       });
    if (hostComputableOp(inst) && inputsKnown) {
      hostComputed.insert(i);
      for (int id : inst.outputs())
        if (id >= 0)
          known.insert(id);
      continue;
    }
    if (!lookupCudaKernel(inst.domain(), inst.op()))
      ++missing[(inst.domain().empty() ? "" : inst.domain() + ".") + inst.op()];
  }
  if (missing.empty())
    return llvm::Error::success();
  std::string list;
  for (auto &[op, count] : missing)
    list += (list.empty() ? "" : ", ") + op + " (" + std::to_string(count) +
            (count == 1 ? " node)" : " nodes)");
  return makeError("the cuda backend has no kernel yet for " + list +
                   "; use --backend=cpu");
}

llvm::Error CudaRuntime::checkKernels() {
  return classifyKernels(program, hostComputed);
}

llvm::Error CudaRuntime::layOut(const CudaRuntimeOptions &opts) {
  const plan::Plan &plan = program.getPlan();
  planBytes = program.gpuArena().size();
  for (const PreparedInstruction &p : program.instructions())
    if (isDeviceStream(p.stream) && !streams.count(p.stream)) {
      auto s = Stream::create();
      if (!s)
        return s.takeError();
      streams.emplace(p.stream, std::move(*s));
    }
  // Several ranks' collectives run on the collective stream, whose
  // communicator ShardOf asks for the rank even where no collective runs.
  if (program.ranks() > 1 && !streams.count(plan::STREAM_COLLECTIVE)) {
    auto s = Stream::create();
    if (!s)
      return s.takeError();
    streams.emplace(plan::STREAM_COLLECTIVE, std::move(*s));
  }
  scratchBytes = opts.scratchBytes;
  uint64_t kernelStreams = 0;
  for (auto &entry : streams)
    kernelStreams += isKernelStream(entry.first);
  // One allocation: the plan's region at offset 0 (its offsets are the
  // plan's), then per kernel stream a cuBLASLt workspace and scratch, and
  // the watermark's counter.
  uint64_t perStream = GemmContext::kDefaultWorkspaceBytes + scratchBytes;
  uint64_t total = llvm::alignTo(std::max<uint64_t>(planBytes, 1),
                                 DeviceArena::kAlignment) +
                   kernelStreams * perStream + DeviceArena::kAlignment;
  auto created = DeviceArena::create(total);
  if (!created)
    return addContext(created.takeError(),
                      "the GPU arena (the plan's proven peak " +
                          llvm::Twine(planBytes) + " bytes, plus " +
                          llvm::Twine(kernelStreams * perStream) +
                          " bytes of GEMM workspace and kernel scratch)");
  arena = std::move(*created);
  auto planOffset = arena.place(std::max<uint64_t>(planBytes, 1));
  if (!planOffset)
    return planOffset.takeError();
  planBase = static_cast<uint8_t *>(arena.base()) + *planOffset;
  for (auto &[stream, s] : streams) {
    if (!isKernelStream(stream))
      continue;
    auto ws = arena.place(GemmContext::kDefaultWorkspaceBytes);
    if (!ws)
      return ws.takeError();
    auto ctx = GemmContext::create(static_cast<uint8_t *>(arena.base()) + *ws,
                                   GemmContext::kDefaultWorkspaceBytes);
    if (!ctx)
      return ctx.takeError();
    gemms[stream] = std::move(*ctx);
    auto sc = arena.place(scratchBytes);
    if (!sc)
      return sc.takeError();
    scratch[stream] = static_cast<uint8_t *>(arena.base()) + *sc;
  }
  auto slot = arena.place(sizeof(unsigned long long));
  if (!slot)
    return slot.takeError();
  watermarkSlot = reinterpret_cast<unsigned long long *>(
      static_cast<uint8_t *>(arena.base()) + *slot);

  // The sentinel everywhere in the plan's region, before anything is
  // copied in: what differs from it later was written.
  if (auto err = fillWithSentinel(planBase, planBytes, nullptr))
    return err;
  ZINC_CUDA_TRY(cudaDeviceSynchronize());

  if (auto err = pinCpuTier(opts.device))
    return err;

  tensors.resize(plan.tensors_size());
  for (int i = 0; i < plan.tensors_size(); ++i) {
    const rt::TensorPlace &place = program.place(i);
    const cpu::TensorRef &host = program.tensor(i);
    tensors[i].dtype = host.dtype;
    tensors[i].shape = host.shape;
    tensors[i].data = place.tier == plan::TIER_GPU
                          ? static_cast<uint8_t *>(planBase) + place.offset
                          : nullptr;
  }
  return llvm::Error::success();
}

llvm::Error CudaRuntime::pinCpuTier(int device) {
  // The CPU tier's pages that device-stream copies read or write are
  // page-locked where they lie, so those copies are DMA that overlaps
  // compute; the rest (master weights, optimizer moments) only the host
  // touches. Locking is per page, so the chunks are locked by several
  // threads at once (docs/cuda-backend.md).
  auto start = std::chrono::steady_clock::now();
  uint8_t *base = program.cpuArena().base();
  std::vector<rt::ByteRange> chunks = rt::planPinnedChunks(
      rt::cpuTierDmaRanges(program), program.cpuArena().size());
  std::vector<cudaError_t> results(chunks.size(), cudaSuccess);
  std::atomic<size_t> next{0};
  auto lockChunks = [&] {
    cudaError_t set = cudaSetDevice(device);
    for (size_t i; (i = next++) < chunks.size();)
      results[i] = set != cudaSuccess
                       ? set
                       : cudaHostRegister(base + chunks[i].begin,
                                          chunks[i].end - chunks[i].begin,
                                          cudaHostRegisterDefault);
  };
  unsigned hardware = std::max(1u, std::thread::hardware_concurrency());
  size_t workers = std::min<size_t>(chunks.size(), std::min(8u, hardware));
  std::vector<std::thread> threads;
  for (size_t w = 1; w < workers; ++w)
    threads.emplace_back(lockChunks);
  lockChunks();
  for (std::thread &t : threads)
    t.join();
  llvm::Error first = llvm::Error::success();
  for (size_t i = 0; i < chunks.size(); ++i) {
    if (results[i] == cudaSuccess) {
      pinnedChunks.push_back(base + chunks[i].begin);
      continue;
    }
    if (!first)
      first = checkCuda(results[i], "cudaHostRegister(" +
                                        llvm::Twine(chunks[i].end - chunks[i].begin) +
                                        " bytes of the CPU tier at byte " +
                                        llvm::Twine(chunks[i].begin) + ")");
  }
  pinTime = std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                .count();
  return first;
}

llvm::Error CudaRuntime::generateOnDevice() {
  for (const rt::RandomInitTarget &target : program.deviceInit()) {
    DeviceFillKind kind = target.kind == rt::RandomFillKind::Normal ? DeviceFillKind::Normal
                          : target.kind == rt::RandomFillKind::One  ? DeviceFillKind::One
                                                                    : DeviceFillKind::Zero;
    const DeviceTensor &t = tensors[target.tensor];
    if (auto err = queueRandomInit(t.data, t.dtype, program.tensor(target.tensor).numElements(),
                                   kind, target.key, target.map,
                                   program.deviceInitSeed(), nullptr))
      return addContext(std::move(err), "--init=random of '" +
                                            program.getPlan().tensors(target.tensor).name() +
                                            "'");
  }
  ZINC_CUDA_TRY(cudaDeviceSynchronize());
  return llvm::Error::success();
}

llvm::Error CudaRuntime::computeOnHost() {
  // The cpu kernels run on the GPU tier's host mirror, where the loader put
  // the constants; plan order and the allocator's lifetimes keep each input
  // intact until its readers have run. Each result is then kept in pinned
  // memory, from which every step copies it in.
  auto &prepared = program.instructions();
  const plan::Plan &plan = program.getPlan();
  uint64_t total = 0;
  for (unsigned i : hostComputed)
    for (const cpu::TensorRef *out : prepared[i].outputs)
      if (out)
        total += llvm::alignTo(std::max<uint64_t>(out->byteSize(), 1), 256);
  // Small constant initializers too: kernels read index lists (Slice's
  // starts, Dropout's ratio) on the host, which device memory would make a
  // synchronisation.
  std::vector<uint32_t> smallConstants;
  for (const plan::Tensor &t : plan.tensors())
    if (t.role() == plan::ROLE_CONSTANT && t.tier() == plan::TIER_GPU &&
        t.size_bytes() <= kHostReadableBytes) {
      smallConstants.push_back(t.id());
      total += llvm::alignTo(std::max<uint64_t>(t.size_bytes(), 1), 256);
    }
  if (!total)
    return llvm::Error::success();
  auto pinned = PinnedBuffer::create(total);
  if (!pinned)
    return pinned.takeError();
  constants = std::move(*pinned);
  uint64_t offset = 0;
  for (unsigned i = 0; i < prepared.size(); ++i) {
    if (!hostComputed.contains(i))
      continue;
    PreparedInstruction &p = prepared[i];
    rt::TransferBytes ignored;
    if (auto err = rt::runOnHost(program, p, rt::StepContext(), ignored))
      return addContext(std::move(err),
                        "node '" + p.source->name() + "' (" + p.source->op() +
                            "), computed at start-up");
    DeviceInstruction &d = device[i];
    d.hostComputed = true;
    for (const cpu::TensorRef *out : p.outputs) {
      if (!out)
        continue;
      uint8_t *dst = static_cast<uint8_t *>(constants.data()) + offset;
      std::memcpy(dst, out->data, out->byteSize());
      d.constants.push_back({deviceAddress(out->data), dst, out->byteSize()});
      if (out->byteSize() <= kHostReadableBytes)
        givePinned(static_cast<uint32_t>(out - &program.tensor(0)), dst);
      offset += llvm::alignTo(std::max<uint64_t>(out->byteSize(), 1), 256);
    }
  }
  for (uint32_t id : smallConstants) {
    uint8_t *dst = static_cast<uint8_t *>(constants.data()) + offset;
    std::memcpy(dst, program.tensor(id).data, program.tensor(id).byteSize());
    givePinned(id, dst);
    offset += llvm::alignTo(
        std::max<uint64_t>(program.tensor(id).byteSize(), 1), 256);
  }
  // Readers of those get the pinned copy: readable by the host and, mapped
  // (unified addressing), by kernels alike.
  for (DeviceInstruction &d : device)
    for (const DeviceTensor *&in : d.inputs)
      if (in) {
        auto found = pinnedViews.find(static_cast<uint32_t>(in - tensors.data()));
        if (found != pinnedViews.end())
          in = &found->second;
      }
  return llvm::Error::success();
}

void CudaRuntime::givePinned(uint32_t id, const void *pinned) {
  DeviceTensor view = tensors[id];
  view.data = const_cast<void *>(pinned);
  pinnedViews.emplace(id, std::move(view));
}

llvm::Error CudaRuntime::prepareInstructions(const CudaRuntimeOptions &opts) {
  const plan::Plan &plan = program.getPlan();
  auto &prepared = program.instructions();
  device.resize(prepared.size());
  // The instructions that signal each event, in plan order: a wait for its
  // n-th signal waits for the n-th of them.
  std::vector<std::vector<unsigned>> signallers(plan.num_events());
  for (unsigned i = 0; i < prepared.size(); ++i)
    for (uint32_t e : prepared[i].signals)
      signallers[e].push_back(i);
  for (unsigned i = 0; i < prepared.size(); ++i) {
    const PreparedInstruction &p = prepared[i];
    DeviceInstruction &d = device[i];
    d.onDevice = isDeviceStream(p.stream);
    if (!d.onDevice)
      continue;
    d.stream = streams.at(p.stream).get();
    if (!p.signals.empty()) {
      auto ev = Event::create();
      if (!ev)
        return ev.takeError();
      d.done = ev->get();
      events.push_back(std::move(*ev));
    }
  }
  for (unsigned i = 0; i < prepared.size(); ++i) {
    const PreparedInstruction &p = prepared[i];
    DeviceInstruction &d = device[i];
    for (auto [e, count] : p.waits) {
      unsigned from = signallers[e][count - 1];
      const DeviceInstruction &s = device[from];
      // Host work is complete once its signal is counted; device work on
      // the same stream is ordered by the stream.
      if (!s.onDevice || (d.onDevice && prepared[from].stream == p.stream))
        continue;
      d.waits.push_back(s.done);
    }
    if (!d.onDevice)
      continue;
    const plan::Instruction &inst = *p.source;
    if (p.kind == rt::InstructionKind::Copy) {
      bool srcDevice = inGpuMirror(p.copySrc), dstDevice = inGpuMirror(p.copyDst);
      d.copySrc = srcDevice ? deviceAddress(p.copySrc) : p.copySrc;
      d.copyDst = dstDevice ? deviceAddress(p.copyDst) : p.copyDst;
      d.copyKind = srcDevice && dstDevice ? cudaMemcpyDeviceToDevice
                   : srcDevice            ? cudaMemcpyDeviceToHost
                   : dstDevice            ? cudaMemcpyHostToDevice
                                          : cudaMemcpyHostToHost;
      continue;
    }
    if (hostComputed.contains(i))
      continue;
    // The device communicator queues on the collective stream: a collective
    // elsewhere would be ordered against the wrong stream's work.
    if (program.ranks() > 1 && p.stream != plan::STREAM_COLLECTIVE &&
        inst.domain() == kZincDomain &&
        (inst.op() == "AllReduce" || inst.op() == "ReduceScatter" || inst.op() == "AllGather"))
      return makeError("node '" + inst.name() + "' (" + inst.op() +
                       "): the cuda backend runs collectives on the collective stream, "
                       "and the plan has this one on the " + plan::streamName(p.stream) +
                       " stream");
    d.fn = lookupCudaKernel(inst.domain(), inst.op());
    d.gemm = gemms.at(p.stream).get();
    d.scratch = scratch.at(p.stream);
    d.scratchBytes = scratchBytes;
    for (int id : inst.inputs())
      d.inputs.push_back(id < 0 ? nullptr : &tensors[id]);
    for (int id : inst.outputs())
      d.outputs.push_back(id < 0 ? nullptr : &tensors[id]);
  }
  allowTf32 = opts.allowTf32;
  if (plan.loss() >= 0)
    readBack.push_back(plan.loss());
  if (plan.has_loss_scaling()) {
    readBack.push_back(plan.loss_scaling().scale());
    readBack.push_back(plan.loss_scaling().found_inf());
  }
  if (int64_t sum = rt::gradSumSquaresTensor(plan); sum >= 0)
    readBack.push_back(static_cast<uint32_t>(sum));
  for (uint32_t id : plan.outputs())
    readBack.push_back(id);
  return llvm::Error::success();
}

llvm::Error CudaRuntime::start(const CudaRuntimeOptions &opts) {
  auto count = cudaDeviceCount();
  if (!count)
    return addContext(count.takeError(), "--backend=cuda");
  if (*count == 0)
    return makeError("--backend=cuda needs a CUDA device, and this machine "
                     "has none (use --backend=cpu)");
  if (opts.device < 0 || opts.device >= *count)
    return makeError("CUDA device " + llvm::Twine(opts.device) +
                     " does not exist (this machine has " +
                     llvm::Twine(*count) + ")");
  int device = opts.device;
  comm::CommKind kind = comm::CommKind::Mpi;
  if (program.ranks() > 1)
    if (auto err = placeRank(opts, *count, device, kind))
      return err;
  ZINC_CUDA_TRY(cudaSetDevice(device));
  deviceIndex = device;
  if (auto err = checkKernels())
    return err;
  CudaRuntimeOptions placed = opts;
  placed.device = device;
  if (auto err = layOut(placed))
    return err;
  if (program.ranks() > 1)
    if (auto err = startCollectives(opts, device, kind))
      return err;
  if (auto err = prepareInstructions(opts))
    return err;
  return computeOnHost();
}

llvm::Error CudaRuntime::placeRank(const CudaRuntimeOptions &opts, int deviceCount,
                                   int &device, comm::CommKind &kind) {
  comm::Communicator *host = program.communicator();
  if (!host)
    return makeError("the plan is for " + llvm::Twine(program.getPlan().ranks()) +
                     " ranks: start them with mpirun (or srun)");
  auto node = comm::mpiNodeRanks();
  if (!node)
    return node.takeError();
  auto choice = comm::chooseDevice(*node, deviceCount, opts.comm, /*ncclBuilt=*/true);
  if (!choice)
    return addContext(choice.takeError(), "rank " + llvm::Twine(host->rank()));
  // Auto must come out the same on every rank: one rank that has to share
  // a GPU makes every rank stage through MPI.
  double needsMpi = choice->comm == comm::CommKind::Mpi ? 1 : 0;
  if (auto err = host->allReduce(&needsMpi, 1, DType::F64, comm::ReduceOp::Max,
                                 "the ranks' choice of --comm"))
    return err;
  device = choice->device;
  kind = comm::agreeOnComm(opts.comm, choice->comm, needsMpi > 0);
  return llvm::Error::success();
}

llvm::Error CudaRuntime::startCollectives(const CudaRuntimeOptions &opts, int device,
                                          comm::CommKind kind) {
  cudaStream_t stream = streams.at(plan::STREAM_COLLECTIVE).get();
  auto made = kind == comm::CommKind::Nccl
                  ? createNcclCommunicator(*program.communicator(), stream,
                                           opts.collectiveTimeout, device)
                  : createStagedCommunicator(*program.communicator(), stream, opts.staging);
  if (!made)
    return made.takeError();
  deviceComm = std::move(*made);
  return llvm::Error::success();
}

llvm::Error CudaRuntime::beforeRun(const PreparedInstruction &inst) {
  const DeviceInstruction &d = device[indexOf(inst)];
  for (cudaEvent_t ev : d.waits) {
    if (d.onDevice)
      ZINC_CUDA_TRY(cudaStreamWaitEvent(d.stream, ev, 0));
    else
      ZINC_CUDA_TRY(cudaEventSynchronize(ev));
  }
  return llvm::Error::success();
}

bool CudaRuntime::deviceReady(const PreparedInstruction &inst) {
  const DeviceInstruction &d = device[indexOf(inst)];
  if (d.onDevice)
    return true;
  // Not ready, or failed: either way beforeRun's synchronize says which.
  return llvm::all_of(d.waits,
                      [](cudaEvent_t ev) { return cudaEventQuery(ev) == cudaSuccess; });
}

llvm::Error CudaRuntime::run(PreparedInstruction &inst, unsigned index,
                             const rt::StepContext &ctx,
                             rt::TransferBytes &bytes) {
  DeviceInstruction &d = device[index];
  if (!d.onDevice)
    return rt::runOnHost(program, inst, ctx, bytes);
  if (inst.kind == rt::InstructionKind::Copy) {
    if (inst.copyBytes)
      ZINC_CUDA_TRY(cudaMemcpyAsync(d.copyDst, d.copySrc, inst.copyBytes,
                                    d.copyKind, d.stream));
    if (d.copyKind == cudaMemcpyHostToDevice)
      bytes.h2d += inst.copyBytes;
    else if (d.copyKind == cudaMemcpyDeviceToHost)
      bytes.d2h += inst.copyBytes;
  } else if (d.hostComputed) {
    for (const DeviceInstruction::ConstantCopy &c : d.constants)
      if (auto err = checkCuda(
              cudaMemcpyAsync(c.dst, c.src, c.bytes, cudaMemcpyHostToDevice,
                              d.stream),
              "cudaMemcpyAsync(" + llvm::Twine(c.bytes) +
                  " bytes computed at start-up)"))
        return err;
  } else {
    CudaKernelCall call{inst.source->op(),
                        inst.source->name(),
                        program.getPlan().opset_version(),
                        inst.attrs,
                        d.inputs,
                        d.outputs};
    call.step = ctx.step;
    call.microBatch = ctx.microBatch;
    call.microBatches = ctx.microBatches;
    call.seed = ctx.seed;
    call.stream = d.stream;
    call.gemm = d.gemm;
    call.allowTf32 = allowTf32;
    call.workspace = d.scratch;
    call.workspaceBytes = d.scratchBytes;
    call.effects = inst.effects;
    call.comm = deviceComm.get();
    if (auto err = d.fn(call))
      return err;
  }
  if (d.done)
    ZINC_CUDA_TRY(cudaEventRecord(d.done, d.stream));
  return llvm::Error::success();
}

llvm::Error CudaRuntime::skip(const PreparedInstruction &, unsigned index) {
  // beforeRun queued its stream waits; recording its event after them
  // passes on what it waited for to whatever waits for it. Host work needs
  // nothing: its signal is counted once its waits were met.
  const DeviceInstruction &d = device[index];
  if (d.onDevice && d.done)
    ZINC_CUDA_TRY(cudaEventRecord(d.done, d.stream));
  return llvm::Error::success();
}

llvm::Error CudaRuntime::finishStep() {
  for (auto &[stream, s] : streams)
    if (auto err = s.synchronize())
      return addContext(std::move(err),
                        "the " + plan::streamName(stream) +
                            " stream's device work of the step (ZINC_SERIAL=1 "
                            "names the instruction)");
  for (uint32_t id : readBack)
    if (auto err = copyTensor(id, /*toDevice=*/false))
      return err;
  return llvm::Error::success();
}

llvm::Error CudaRuntime::finishInstruction(const PreparedInstruction &inst) {
  if (!device[indexOf(inst)].onDevice)
    return llvm::Error::success();
  return checkCuda(cudaDeviceSynchronize(), "its device work");
}

llvm::Expected<uint64_t> CudaRuntime::measuredGpuPeak() {
  // Only the words above the last mark are scanned: the mark only rises.
  uint64_t from = watermarkWords * 4;
  if (from >= planBytes)
    return from;
  ZINC_CUDA_TRY(cudaMemset(watermarkSlot, 0, sizeof(*watermarkSlot)));
  if (auto err = queueHighestChange(static_cast<uint8_t *>(planBase) + from,
                                    planBytes - from, watermarkSlot, nullptr))
    return err;
  unsigned long long words = 0;
  ZINC_CUDA_TRY(cudaMemcpy(&words, watermarkSlot, sizeof(words),
                           cudaMemcpyDeviceToHost));
  watermarkWords += words;
  return watermarkWords * 4;
}

llvm::Error CudaRuntime::copyTensor(uint32_t id, bool toDevice) {
  if (program.place(id).tier != plan::TIER_GPU)
    return llvm::Error::success();
  const cpu::TensorRef &host = program.tensor(id);
  uint64_t n = host.byteSize();
  if (!n)
    return llvm::Error::success();
  void *dev = tensors[id].data;
  return checkCuda(
      toDevice ? cudaMemcpy(dev, host.data, n, cudaMemcpyHostToDevice)
               : cudaMemcpy(host.data, dev, n, cudaMemcpyDeviceToHost),
      "cudaMemcpy(" + llvm::Twine(n) + " bytes of '" +
          program.getPlan().tensors(id).name() + "' " +
          (toDevice ? "to" : "from") + " the device)");
}

llvm::Error CudaRuntime::inputsToDevice(llvm::ArrayRef<uint32_t> ids) {
  for (uint32_t id : ids)
    if (auto err = copyTensor(id, /*toDevice=*/true))
      return err;
  return llvm::Error::success();
}

llvm::Error CudaRuntime::stateToDevice() {
  // --init=random's GPU-tier tensors are made on the device; their host
  // mirror holds nothing to copy.
  llvm::DenseSet<uint32_t> generated;
  for (const rt::RandomInitTarget &target : program.deviceInit())
    generated.insert(target.tensor);
  for (const plan::Tensor &t : program.getPlan().tensors())
    if (persistentRole(t.role()) && !generated.contains(t.id()))
      if (auto err = copyTensor(t.id(), /*toDevice=*/true))
        return err;
  if (generated.empty())
    return llvm::Error::success();
  if (auto err = generateOnDevice())
    return err;
  // Made once: a later call (none today) copies the mirror as usual.
  program.clearDeviceInit();
  return llvm::Error::success();
}

llvm::Error CudaRuntime::stateToHost() {
  for (const plan::Tensor &t : program.getPlan().tensors())
    if (persistentRole(t.role()))
      if (auto err = copyTensor(t.id(), /*toDevice=*/false))
        return err;
  return llvm::Error::success();
}

} // namespace

llvm::Error checkCudaSupport(rt::Program &program) {
  llvm::DenseSet<unsigned> hostComputed;
  return classifyKernels(program, hostComputed);
}

llvm::Expected<std::unique_ptr<rt::ExecutionHooks>>
createCudaRuntime(rt::Program &program, const CudaRuntimeOptions &opts) {
  auto runtime = std::make_unique<CudaRuntime>(program);
  if (auto err = runtime->start(opts))
    return err;
  return std::unique_ptr<rt::ExecutionHooks>(std::move(runtime));
}

} // namespace zinc::cuda
