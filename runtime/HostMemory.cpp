//===- HostMemory.cpp - Does the plan's host memory fit this machine? -----===//
#include "zinc/runtime/HostMemory.h"
#include "zinc/support/Error.h"
#include "zinc/support/Size.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/MemoryBuffer.h"
#include <unistd.h>

namespace zinc::rt {

/// Values at or above this mean "no limit" (v1 writes a page-rounded
/// INT64_MAX, v2 writes "max").
static constexpr uint64_t kUnlimited = uint64_t(1) << 62;

static llvm::Optional<uint64_t> readLimitFile(const std::string &path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer)
    return llvm::None;
  uint64_t bytes;
  if ((*buffer)->getBuffer().trim().getAsInteger(10, bytes) ||
      bytes >= kUnlimited)
    return llvm::None;
  return bytes;
}

/// The cgroup path and its ancestors, deepest first: "/a/b" -> "/a/b",
/// "/a", "". A limit set on any of them applies.
static llvm::SmallVector<std::string, 8>
selfAndAncestors(llvm::StringRef path) {
  llvm::SmallVector<std::string, 8> paths;
  path = path.rtrim('/');
  while (true) {
    paths.push_back(path.str());
    if (path.empty())
      break;
    path = path.substr(0, path.rfind('/'));
  }
  return paths;
}

llvm::Optional<MemoryLimit>
readCgroupMemoryLimit(llvm::StringRef procSelfCgroup,
                      llvm::StringRef cgroupRoot) {
  auto text = llvm::MemoryBuffer::getFile(procSelfCgroup, /*IsText=*/true);
  if (!text)
    return llvm::None;
  llvm::Optional<MemoryLimit> tightest;
  auto consider = [&](const std::string &file) {
    auto bytes = readLimitFile(file);
    if (bytes && (!tightest || *bytes < tightest->bytes))
      tightest = MemoryLimit{*bytes, file};
  };
  llvm::SmallVector<llvm::StringRef, 16> lines;
  (*text)->getBuffer().split(lines, '\n', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef line : lines) {
    // "hierarchy-id:controllers:path"; v2 is "0::path".
    auto [id, rest] = line.split(':');
    auto [controllers, path] = rest.split(':');
    llvm::SmallVector<llvm::StringRef, 4> names;
    controllers.split(names, ',');
    bool v2 = id == "0" && controllers.empty();
    bool v1Memory = llvm::is_contained(names, "memory");
    if (!v2 && !v1Memory)
      continue;
    // Inside a container the path may name the host's hierarchy, of which
    // only the container's part is mounted: files that are not there are
    // skipped, and the root's own limit still counts.
    for (const std::string &p : selfAndAncestors(path)) {
      if (v2)
        consider((cgroupRoot + p + "/memory.max").str());
      else
        consider((cgroupRoot + "/memory" + p + "/memory.limit_in_bytes").str());
    }
  }
  return tightest;
}

MemoryLimit hostMemoryLimit() {
  MemoryLimit physical{static_cast<uint64_t>(::sysconf(_SC_PHYS_PAGES)) *
                           static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)),
                       "physical memory"};
  auto cgroup = readCgroupMemoryLimit();
  if (cgroup && cgroup->bytes < physical.bytes)
    return *cgroup;
  return physical;
}

HostMemoryNeed hostMemoryNeed(const plan::Plan &plan,
                              bool gpuTierInHostMemory) {
  bool cpuUsed = false;
  for (const plan::Tensor &t : plan.tensors())
    cpuUsed |= t.tier() == plan::TIER_CPU;
  HostMemoryNeed need;
  for (const plan::TierInfo &info : plan.tiers()) {
    if (info.tier() == plan::TIER_CPU && cpuUsed)
      need.cpuTier = info.peak();
    if (info.tier() == plan::TIER_GPU && gpuTierInHostMemory)
      need.emulatedGpuTier = info.peak();
  }
  return need;
}

/// `bytes` rounded down to a whole GiB (or MiB), as a size flag takes it.
static std::string flagSize(uint64_t bytes) {
  constexpr uint64_t kMiB = 1 << 20, kGiB = 1 << 30;
  if (bytes >= kGiB)
    return std::to_string(bytes / kGiB) + "GiB";
  return std::to_string(bytes / kMiB) + "MiB";
}

llvm::Error checkHostMemory(const HostMemoryNeed &need,
                            const MemoryLimit &limit) {
  if (need.total() <= limit.bytes)
    return llvm::Error::success();
  std::string parts = "the cpu tier's proven peak " + formatSize(need.cpuTier);
  std::string fits;
  if (need.emulatedGpuTier) {
    parts += " + the gpu tier's " + formatSize(need.emulatedGpuTier) +
             ", which the cpu backend keeps in host memory";
    fits = "compile it with --cpu-mem and --gpu-mem adding up to at most " +
           flagSize(limit.bytes);
  } else {
    fits = "compile it with --cpu-mem=" + flagSize(limit.bytes) + " or less";
  }
  std::string limitText = limit.source == "physical memory"
                              ? formatSize(limit.bytes) + " of physical memory"
                              : "a cgroup limit of " + formatSize(limit.bytes) +
                                    " (" + limit.source + ")";
  return makeError("the plan needs " + formatSize(need.total()) +
                   " of host memory (" + parts + "), and this machine has " +
                   limitText + ": " + fits +
                   " (offloading the rest to NVMe), or run it where it fits");
}

} // namespace zinc::rt
