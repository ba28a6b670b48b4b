//===- NvmeCopyRanges.h - What an NVMe copy touches, and when two conflict ===//
//
// The NVMe lane (NvmeLane.cpp) keeps copies apart by this rule, and the
// write-behind analysis (NvmeWriteBehind.cpp) is sound only because it
// predicts the lane with the same rule: both use these functions.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_NVMECOPYRANGES_H
#define ZINC_RUNTIME_NVMECOPYRANGES_H

#include "zinc/runtime/Program.h"
#include <cstdint>

namespace zinc::rt {

/// A half-open byte range, of the tier or of host memory.
struct ByteRange {
  uintptr_t begin = 0, end = 0;
  bool overlaps(ByteRange o) const { return begin < o.end && o.begin < end; }
};

/// The tier sectors and host bytes a direct NVMe copy moves (whole sectors
/// on both sides), and its direction.
struct NvmeCopyRanges {
  ByteRange tier, host;
  bool write = false;
};

inline NvmeCopyRanges nvmeCopyRanges(const PreparedInstruction &inst) {
  bool write = inst.copyKind == CopyKind::NvmeWrite;
  uint64_t span = alignUpToSector(inst.copyBytes);
  auto host = reinterpret_cast<uintptr_t>(write ? inst.copySrc : inst.copyDst);
  return {
      {inst.nvmeOffset, inst.nvmeOffset + span}, {host, host + span}, write};
}

/// Whether two copies may not be in flight together: they touch the same
/// sectors unless both read them, or the same host bytes unless both only
/// read them (a write to the tier reads host memory; a read writes it).
inline bool nvmeCopiesConflict(const NvmeCopyRanges &a,
                               const NvmeCopyRanges &b) {
  if ((a.write || b.write) && a.tier.overlaps(b.tier))
    return true;
  return !(a.write && b.write) && a.host.overlaps(b.host);
}

} // namespace zinc::rt

#endif
