//===- HostMemory.h - Does the plan's host memory fit this machine? -------===//
//
// The arenas are reserved with MAP_NORESERVE, so nothing fails at start-up
// when a plan needs more memory than the machine has: without this check
// the OOM killer ends the run in step 0 (or, without a cgroup, another
// process). zinc-run compares the plan's proven peaks in host memory (the
// CPU tier, and the GPU tier where the cpu backend emulates it) with the
// physical memory and the memory limit of the process's cgroup (v1 or v2,
// the tightest over its ancestors) before it loads a weight.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_HOSTMEMORY_H
#define ZINC_RUNTIME_HOSTMEMORY_H

#include "Plan.pb.h"
#include "llvm/ADT/Optional.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include <cstdint>
#include <string>

namespace zinc::rt {

/// A memory limit and what sets it.
struct MemoryLimit {
  uint64_t bytes = 0;
  /// "physical memory" or the cgroup file that sets the limit.
  std::string source;
};

/// The tightest memory limit of the cgroup named in `procSelfCgroup` (the
/// format of /proc/self/cgroup) and its ancestors, read under `cgroupRoot`
/// (cgroup v2's memory.max, or v1's memory/.../memory.limit_in_bytes); None
/// when nothing limits it.
llvm::Optional<MemoryLimit>
readCgroupMemoryLimit(llvm::StringRef procSelfCgroup = "/proc/self/cgroup",
                      llvm::StringRef cgroupRoot = "/sys/fs/cgroup");

/// The smaller of this machine's physical memory and its cgroup limit.
MemoryLimit hostMemoryLimit();

/// Bytes of host memory the plan's arenas touch at most: the CPU tier's
/// proven peak when tensors live there, plus the GPU tier's when it is
/// emulated in host memory (the cpu backend).
struct HostMemoryNeed {
  uint64_t cpuTier = 0;
  uint64_t emulatedGpuTier = 0;
  uint64_t total() const { return cpuTier + emulatedGpuTier; }
};
HostMemoryNeed hostMemoryNeed(const plan::Plan &plan, bool gpuTierInHostMemory);

/// An error saying what does not fit and what would, when `need` exceeds
/// `limit`.
llvm::Error checkHostMemory(const HostMemoryNeed &need,
                            const MemoryLimit &limit);

} // namespace zinc::rt

#endif
