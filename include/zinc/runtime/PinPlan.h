//===- PinPlan.h - Which host memory a device backend page-locks ----------===//
//
// DMA between the GPU and host memory needs the host pages locked
// (cudaHostRegister). Locking costs time per page, so a CPU tier of 100 GiB
// locked whole takes minutes to start. What DMA touches is far less: the
// ranges the plan's device-stream copies read and write (a parameter's
// compute copy, its gradient), not the optimizer's master weights and
// moments, which only the host reads. These functions find those ranges and
// cut them into chunks that registering calls can lock in parallel; they are
// plain host code, tested without a GPU.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_PINPLAN_H
#define ZINC_RUNTIME_PINPLAN_H

#include "llvm/ADT/ArrayRef.h"
#include <cstdint>
#include <vector>

namespace zinc::rt {

class Program;

/// Bytes [begin, end) from the start of an arena.
struct ByteRange {
  uint64_t begin = 0;
  uint64_t end = 0;
  bool operator==(const ByteRange &o) const {
    return begin == o.begin && end == o.end;
  }
};

/// How to cut what DMA touches into registrations.
struct PinChunking {
  /// Chunk edges fall on these (the huge-page size, so no two chunks share
  /// a page, whatever pages back the arena).
  uint64_t alignment = uint64_t(2) << 20;
  /// Largest chunk: large enough that per-call overhead vanishes, small
  /// enough that several threads share a big range.
  uint64_t maxChunkBytes = uint64_t(1) << 30;
};

/// The chunks of an arena of `arenaBytes` to page-lock so that every range
/// of `dma` can be DMA: each range widened to `chunking.alignment` (and
/// clipped to the arena), ranges that then touch or overlap merged, each
/// merged range cut into pieces of at most `chunking.maxChunkBytes`, in
/// address order. Empty ranges lock nothing.
std::vector<ByteRange> planPinnedChunks(llvm::ArrayRef<ByteRange> dma,
                                        uint64_t arenaBytes,
                                        const PinChunking &chunking = {});

/// The ranges of `program`'s CPU-tier arena that copies on its device
/// streams (compute, h2d, d2h, collective) read or write.
std::vector<ByteRange> cpuTierDmaRanges(Program &program);

} // namespace zinc::rt

#endif
