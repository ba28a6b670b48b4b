//===- ArenaLayout.h - Static offsets for buffers with known lifetimes ----===//
//
// The heap-simulator half of allocation: given buffers with a size and a
// live interval over the flattened schedule, assign offsets in one arena so
// that buffers live at the same time never overlap. Policy-free: callers
// decide lifetimes; this only packs.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_PASSES_ARENALAYOUT_H
#define ZINC_PASSES_ARENALAYOUT_H

#include "llvm/ADT/ArrayRef.h"
#include <cstdint>
#include <vector>

namespace zinc {

/// A buffer live over instruction indices [begin, end] inclusive.
struct BufferInterval {
  uint64_t size = 0;
  int64_t begin = 0;
  int64_t end = 0;
};

struct ArenaLayout {
  /// offsets[i] is the byte offset of buffer i.
  std::vector<uint64_t> offsets;
  /// Bytes the arena needs: the highest end of any placed buffer.
  uint64_t peak = 0;
  /// The largest sum of sizes live at one instant: a lower bound on peak.
  uint64_t liveLowerBound = 0;
};

/// Best-fit packing: the smaller of largest-first and first-use-first (and a
/// largest-first first fit where that is smaller still); offsets are
/// multiples of `alignment`. Arenas of 8192 buffers or more keep the
/// first-use-first packing alone when it is within 1/4096 of the live bound.
/// Deterministic: ties break by buffer index, and the same layout whether
/// or not first fit runs on a second thread beside best fit (large arenas
/// the sweep packs far from the bound). Safe to call from several threads.
/// Requires begin <= end. About O(n log n): see ArenaLayout.cpp.
ArenaLayout layoutArena(llvm::ArrayRef<BufferInterval> buffers,
                        uint64_t alignment = 64);

} // namespace zinc

#endif
