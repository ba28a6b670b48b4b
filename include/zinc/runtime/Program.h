//===- Program.h - A loaded plan: arenas laid out, weights in place -------===//
#ifndef ZINC_RUNTIME_PROGRAM_H
#define ZINC_RUNTIME_PROGRAM_H

#include "zinc/plan/PlanFile.h"
#include "zinc/runtime/NvmeStore.h"
#include "zinc/runtime/RandomInit.h"
#include "zinc/runtime/cpu/Kernel.h"
#include "llvm/Support/Error.h"
#include <memory>
#include <string>
#include <vector>

namespace zinc::comm {
class Communicator;
}

namespace zinc::rt {

/// One tier's memory: a single anonymous mapping made at start-up, page
/// (4096-byte) aligned, so O_DIRECT transfers can use it. The mapping
/// reserves the tier's capacity, but only the first `usable` bytes (the
/// plan's proven peak, rounded up to a page) are readable and writable: a
/// kernel that strays past the last tensor of the tier faults instead of
/// silently reading some other memory.
///
/// The usable bytes are left untouched at start-up (anonymous memory reads
/// as zero) and kept in 4 KiB pages (no transparent huge pages), so the
/// pages the step touches are exactly the pages the kernel maps in, and the
/// high-water mark is read from the memory itself: touchedBytes() is the
/// end of the highest page mincore(2) reports resident. A page counts as
/// touched when it was read or written: Linux maps the shared zero page on
/// a read fault, and mincore reports that page resident too.
class Arena {
public:
  Arena() = default;
  ~Arena();
  Arena(const Arena &) = delete;
  Arena &operator=(const Arena &) = delete;

  /// Maps `capacity` bytes (at least `usable`) and opens the first `usable`;
  /// with `hugePages`, on a 2 MiB boundary and advised to use huge pages
  /// (for buffers O_DIRECT transfers use), else advised against them.
  llvm::Error allocate(uint64_t capacity, uint64_t usable,
                       llvm::StringRef tierName, bool hugePages = false);
  uint8_t *base() const { return data; }
  /// Readable and writable bytes from base().
  uint64_t size() const { return usableBytes; }
  /// Bytes the mapping reserves (the tier's capacity).
  uint64_t reserved() const { return mappedBytes; }

  /// Measured: the end of the highest page of the usable bytes that was
  /// ever touched (read or written) since allocate(), 0 when none was. A
  /// multiple of the page size (2 MiB where huge pages back the arena).
  /// Residency only grows (short of the system swapping the arena out), so each
  /// call scans only the pages above the last mark, from the top down, and
  /// allocates nothing.
  llvm::Expected<uint64_t> touchedBytes() const;

private:
  uint8_t *data = nullptr;
  uint64_t usableBytes = 0;
  uint64_t mappedBytes = 0;
  /// Pages below this mark were seen touched.
  mutable uint64_t touchedPages = 0;
};

/// How an instruction runs.
enum class InstructionKind {
  Kernel, ///< the op's cpu kernel
  Copy,   ///< zinc.Copy / zinc.CopyInto: bytes from one buffer to another
};

/// Which link a copy moves bytes over (what --metrics counts).
enum class CopyKind { Local, H2D, D2H, NvmeRead, NvmeWrite };

/// An instruction resolved against the arenas, ready to run.
struct PreparedInstruction {
  const plan::Instruction *source = nullptr;
  InstructionKind kind = InstructionKind::Kernel;
  plan::Stream stream = plan::STREAM_COMPUTE;
  /// Gradient accumulation (Instruction.update_only): does its work only in
  /// an optimizer step's last micro-batch; in the others it only waits and
  /// signals.
  bool updateOnly = false;
  cpu::KernelFn kernel = nullptr;
  /// The op's declared effects (which inputs it updates in place).
  const OpEffects *effects = nullptr;
  AttributeList attrs;
  std::vector<const cpu::TensorRef *> inputs;
  std::vector<cpu::TensorRef *> outputs;

  /// Copies: the link, the bytes, the buffers (null on the NVMe side, which
  /// `nvmeOffset` addresses) and whether an NVMe transfer can go straight
  /// between the CPU tensor and the file (aligned, with room for the whole
  /// sectors) or must pass through the program's bounce buffer.
  CopyKind copyKind = CopyKind::Local;
  uint64_t copyBytes = 0;
  const uint8_t *copySrc = nullptr;
  uint8_t *copyDst = nullptr;
  uint64_t nvmeOffset = 0;
  bool nvmeDirect = false;
  /// An NVMe write nothing another stream can see waits for: the NVMe lane
  /// may hold it back and batch it (NvmeWriteBehind.cpp).
  bool nvmeWriteBehind = false;

  /// Events: wait until event `first` was signalled `second` times this step
  /// (the signals that precede this instruction in plan order).
  std::vector<std::pair<uint32_t, uint32_t>> waits;
  std::vector<uint32_t> signals;

  /// Kernels: the scratch the call gets, at the start of its stream's
  /// workspace (the plan's buffer for it): exactly kernelWorkspaceBytes.
  uint8_t *workspace = nullptr;
  uint64_t workspaceBytes = 0;
};

/// How to load a plan.
struct LoadOptions {
  /// Directory the plan's model and its external data are read from
  /// (zinc-run --model-dir); empty: the directory the model was compiled
  /// from (PlanPaths.h).
  std::string modelDir;
  /// Directory for the NVMe tier's file (zinc-run --nvme-dir); required by
  /// plans that keep tensors in the NVMe tier.
  std::string nvmeDir;
  /// Receives one-line warnings (the NVMe tier falling back to buffered I/O).
  std::function<void(llvm::StringRef)> warn;
  /// Block size, queue depth and validation of the NVMe tier's I/O.
  NvmeIoOptions nvmeIo;
  /// The ranks' communicator (zinc-run under mpirun), or null for one
  /// rank: shards load this rank's share, collectives run over it. The
  /// plan's rank count must be its size.
  comm::Communicator *comm = nullptr;
  /// zinc-run --init=random: trained parameters (and BatchNorm running
  /// statistics) come from the generator seeded `initSeed`
  /// (RandomInit.h), and no initializer of theirs is read.
  bool randomInit = false;
  uint64_t initSeed = 0;
  /// Whether the GPU tier lives in host memory (the cpu backend emulates
  /// it there): load() then counts its peak with the CPU tier's against the
  /// machine's memory (HostMemory.h).
  bool gpuTierInHostMemory = true;
  /// With randomInit: GPU-tier tensors are left to the device backend,
  /// which generates them in device memory (Program::deviceInit()).
  bool deviceGeneratesGpuTier = false;
};

/// Where a tensor lives.
struct TensorPlace {
  plan::Tier tier = plan::TIER_GPU;
  uint64_t offset = 0;
  /// alignTo(max(size_bytes, 1), the tier's alignment): what it occupies.
  uint64_t extent = 0;
};

/// Everything zinc-run needs in memory to run steps. Allocates all memory in
/// load(); nothing after.
class Program {
public:
  /// Reads and checks the plan (what this run and this machine need of it:
  /// paths, ranks, host memory, an NVMe directory; then the plan verifier:
  /// a plan from a file is refused unless it verifies), lays out the tiers,
  /// prepares instructions and loads every initializer into its home tier.
  static llvm::Expected<std::unique_ptr<Program>>
  load(llvm::StringRef planPath, const LoadOptions &opts = {});
  /// The same from a plan already in memory, with every check load() makes;
  /// errors start with `what` (the plan's name for the user).
  static llvm::Expected<std::unique_ptr<Program>>
  fromPlanChecked(plan::Plan plan, const LoadOptions &opts,
                  llvm::StringRef what);
  /// The same from a plan already in memory (tests, embedders), without
  /// those checks or the verifier: the caller vouches for the plan.
  static llvm::Expected<std::unique_ptr<Program>>
  fromPlan(plan::Plan plan, const LoadOptions &opts = {});

  const plan::Plan &getPlan() const { return plan; }
  /// A tensor's view; NVMe-tier tensors have no host buffer (data is null).
  cpu::TensorRef &tensor(int id) { return tensors[id]; }
  const cpu::TensorRef &tensor(int id) const { return tensors[id]; }
  const TensorPlace &place(int id) const { return places[id]; }
  std::vector<PreparedInstruction> &instructions() { return prepared; }
  const Arena &gpuArena() const { return gpu; }
  const Arena &cpuArena() const { return cpu; }
  /// The NVMe tier, or null when the plan keeps nothing there.
  NvmeStore *nvme() const { return nvmeStore.get(); }
  /// The ranks' communicator, or null for one rank.
  comm::Communicator *communicator() const { return comm; }
  unsigned rank() const;
  unsigned ranks() const;
  /// Staging for NVMe transfers that cannot go direct (kIoAlignment-aligned).
  uint8_t *bounceBuffer() const { return bounce.base(); }

  /// --init=random's GPU-tier tensors that the device backend generates
  /// (LoadOptions::deviceGeneratesGpuTier), under deviceInitSeed(); empty
  /// once cleared (a resume put the checkpoint's values in host memory).
  llvm::ArrayRef<RandomInitTarget> deviceInit() const { return pendingDeviceInit; }
  uint64_t deviceInitSeed() const { return initSeed; }
  void clearDeviceInit() { pendingDeviceInit.clear(); }
  /// Measured: seconds load() spent loading or generating initializers.
  double weightsSeconds() const { return weightSeconds; }

  /// Reads an NVMe-tier tensor's bytes into `dst` (tests, --save-weights).
  llvm::Error readNvmeTensor(int id, void *dst) const;
  /// Writes `src` (the tensor's bytes) into an NVMe-tier tensor (resuming
  /// from a checkpoint).
  llvm::Error writeNvmeTensor(int id, const void *src);

private:
  static llvm::Expected<std::unique_ptr<Program>>
  create(plan::Plan plan, const LoadOptions &opts, bool verify);
  /// A stream's kernel workspace: the plan's buffer for it, or none.
  struct StreamWorkspace {
    uint8_t *data = nullptr;
    uint64_t bytes = 0;
  };

  llvm::Error layOut(const LoadOptions &opts);
  void layOutWorkspaces();
  llvm::Error prepare();
  /// Sets a kernel instruction's workspace from its stream's, or fails when
  /// the plan gives the stream less than the kernel takes.
  llvm::Error giveWorkspace(PreparedInstruction &p, const std::string &where);
  llvm::Error loadWeights(const LoadOptions &opts);

  plan::Plan plan;
  Arena gpu, cpu, bounce;
  StreamWorkspace workspaces[plan::Stream_ARRAYSIZE];
  std::unique_ptr<NvmeStore> nvmeStore;
  std::vector<cpu::TensorRef> tensors;
  std::vector<TensorPlace> places;
  std::vector<PreparedInstruction> prepared;
  comm::Communicator *comm = nullptr;
  std::vector<RandomInitTarget> pendingDeviceInit;
  uint64_t initSeed = 0;
  double weightSeconds = 0;
};

/// The plan's rank count against the ranks started (LoadOptions::comm),
/// with what to do about a mismatch.
llvm::Error checkRanks(const plan::Plan &plan, const LoadOptions &opts);

/// "the plan keeps N bytes in the NVMe tier; give --nvme-dir=DIR" when the
/// plan has NVMe tensors and `opts` names no directory.
llvm::Error checkNvmeDir(const plan::Plan &plan, const LoadOptions &opts);

} // namespace zinc::rt

#endif
