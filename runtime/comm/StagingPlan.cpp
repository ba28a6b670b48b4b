//===- StagingPlan.cpp - Chunks of a collective staged through the host -===//
#include "zinc/runtime/comm/StagingPlan.h"
#include <algorithm>
#include <cassert>

namespace zinc::comm {

StagingPlan planStaging(int64_t elements, uint64_t slotBytesPerElement,
                        uint64_t slotBytes, unsigned slots) {
  assert(slots >= 1 && slotBytesPerElement >= 1 &&
         slotBytes >= slotBytesPerElement);
  StagingPlan plan;
  int64_t perChunk = static_cast<int64_t>(slotBytes / slotBytesPerElement);
  for (int64_t begin = 0; begin < elements; begin += perChunk) {
    StagedChunk c;
    c.begin = begin;
    c.count = std::min(perChunk, elements - begin);
    c.slot = static_cast<unsigned>(plan.chunks.size() % slots);
    plan.chunks.push_back(c);
  }
  // A pipeline `slots` deep: chunk k's copy to the host is queued while the
  // host exchanges chunk k - (slots - 1), so every slot but the exchanging
  // one is being filled. Slot reuse needs no host wait: chunk k's ToHost is
  // queued after chunk k - slots's ToDevice on the same stream.
  auto n = static_cast<unsigned>(plan.chunks.size());
  for (unsigned k = 0; k + 1 < n + slots; ++k) {
    if (k < n)
      plan.steps.push_back({StageStepKind::ToHost, k});
    if (k + 1 >= slots) {
      unsigned j = k + 1 - slots;
      if (j < n) {
        plan.steps.push_back({StageStepKind::Exchange, j});
        plan.steps.push_back({StageStepKind::ToDevice, j});
      }
    }
  }
  return plan;
}

} // namespace zinc::comm
