//===- PinPlan.cpp - The CPU tier's ranges that DMA touches, in chunks ----===//
#include "zinc/runtime/PinPlan.h"
#include "zinc/runtime/Program.h"
#include "llvm/Support/MathExtras.h"
#include <algorithm>

namespace zinc::rt {

std::vector<ByteRange> planPinnedChunks(llvm::ArrayRef<ByteRange> dma,
                                        uint64_t arenaBytes,
                                        const PinChunking &chunking) {
  uint64_t align = std::max<uint64_t>(chunking.alignment, 1);
  uint64_t most = std::max(llvm::alignDown(chunking.maxChunkBytes, align), align);
  std::vector<ByteRange> widened;
  for (const ByteRange &r : dma) {
    uint64_t end = std::min(r.end, arenaBytes);
    if (r.begin >= end)
      continue;
    widened.push_back({llvm::alignDown(r.begin, align),
                       std::min(llvm::alignTo(end, align), arenaBytes)});
  }
  std::sort(widened.begin(), widened.end(),
            [](const ByteRange &a, const ByteRange &b) { return a.begin < b.begin; });
  std::vector<ByteRange> merged;
  for (const ByteRange &r : widened) {
    if (!merged.empty() && r.begin <= merged.back().end)
      merged.back().end = std::max(merged.back().end, r.end);
    else
      merged.push_back(r);
  }
  std::vector<ByteRange> chunks;
  for (const ByteRange &r : merged)
    for (uint64_t at = r.begin; at < r.end; at += most)
      chunks.push_back({at, std::min(at + most, r.end)});
  return chunks;
}

static bool onDeviceStream(plan::Stream s) {
  return s == plan::STREAM_COMPUTE || s == plan::STREAM_H2D ||
         s == plan::STREAM_D2H || s == plan::STREAM_COLLECTIVE;
}

std::vector<ByteRange> cpuTierDmaRanges(Program &program) {
  const uint8_t *base = program.cpuArena().base();
  uint64_t size = program.cpuArena().size();
  std::vector<ByteRange> ranges;
  auto add = [&](const uint8_t *p, uint64_t bytes) {
    if (!p || !bytes || p < base || p >= base + size)
      return;
    uint64_t begin = static_cast<uint64_t>(p - base);
    ranges.push_back({begin, std::min(begin + bytes, size)});
  };
  for (const PreparedInstruction &p : program.instructions()) {
    if (p.kind != InstructionKind::Copy || !onDeviceStream(p.stream))
      continue;
    add(p.copySrc, p.copyBytes);
    add(p.copyDst, p.copyBytes);
  }
  return ranges;
}

} // namespace zinc::rt
