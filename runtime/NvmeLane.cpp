//===- NvmeLane.cpp - The NVMe stream: many transfers in flight, merged ---===//
//
// Run one at a time, the NVMe stream's copies would give the device one
// request at a time: a tensor smaller than a block would see an effective
// queue depth of 1, and the tier would move a fraction of what its engine
// moves sequentially. So this lane submits each copy as soon as its waits are
// met and goes on to the next, keeping up to kMaxInFlightBytes queued, and
// completes them in plan order: an instruction's events are signalled only
// once its bytes have landed, so every other stream sees exactly what the
// one-at-a-time lane gave it.
//
// Write-backs that no other stream can tell apart from in-order ones
// (PreparedInstruction::nvmeWriteBehind, NvmeWriteBehind.cpp) are held back
// and written in batches of kWriteBehindBytes, sorted by tier offset and
// merged where adjacent: the backward pass frees them one at a time, and one
// at a time each would be a short burst paying the device's latency.
//
// Copies that follow each other in the lane, go the same way and are
// adjacent in the tier, in either order (the compiler lays the tier out in
// the order the step reads it: TierLayout.cpp), are merged into one gathered
// request, so small tensors travel inside full blocks. Two copies that touch
// the same sectors (unless both read them) or the same host bytes (unless both
// only read them) are never in flight together: the later waits for the
// earlier.
//
//===----------------------------------------------------------------------===//
#include "ExecutorImpl.h"
#include "NvmeCopyRanges.h"
#include "zinc/plan/NvmeWriteBehind.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include <deque>

namespace zinc::rt {

namespace {

/// Bytes queued at the engine at most: enough to keep its queue (32 blocks
/// of 1 MiB by default) full across many small tensors.
constexpr uint64_t kMaxInFlightBytes = 256ull << 20;
constexpr size_t kMaxInFlightGroups = 256;
/// A merged request grows no further: the first instruction's signal waits
/// for the whole request.
constexpr uint64_t kMaxGroupBytes = 16ull << 20;
/// Held-back writes (nvmeWriteBehind) go out once this many bytes wait:
/// bursts long enough that the device's latency no longer shows. The cost
/// model simulates the same batches.
constexpr uint64_t kWriteBehindBytes = plan::kNvmeWriteBehindBytes;

/// Copies that move as one request: consecutive in the lane, one direction,
/// adjacent in the tier.
struct Group {
  bool write = false;
  /// Tier range [offset, offset + span), whole sectors.
  uint64_t offset = 0, span = 0;
  llvm::SmallVector<NvmeSegment, 4> segments;
  /// What each member moves, and the members' plan indices, in lane order.
  llvm::SmallVector<NvmeCopyRanges, 4> copies;
  llvm::SmallVector<unsigned, 4> members;
  std::unique_ptr<NvmePending> pending;

  /// Whether `copy` must wait for this group (nvmeCopiesConflict).
  bool conflicts(const NvmeCopyRanges &copy) const {
    return llvm::any_of(copies, [&](const NvmeCopyRanges &mine) {
      return nvmeCopiesConflict(mine, copy);
    });
  }
  void add(unsigned index, const NvmeCopyRanges &copy) {
    copies.push_back(copy);
    members.push_back(index);
    span += copy.tier.end - copy.tier.begin;
  }
};

} // namespace

void Executor::Impl::runNvmeLane(Lane &lane) {
  auto &prepared = program.instructions();
  NvmeStore &store = *program.nvme();
  std::deque<Group> inFlight;
  uint64_t inFlightBytes = 0;
  Group forming;
  bool hasForming = false;
  // Held-back writes not yet submitted, and those submitted: both complete
  // out of the FIFO's order, which nothing waits for.
  std::vector<unsigned> heldBack;
  uint64_t heldBackBytes = 0;
  std::vector<Group> behind;

  auto hostOf = [](const NvmeCopyRanges &copy) {
    return reinterpret_cast<uint8_t *>(copy.host.begin);
  };

  // Each returns false once the step failed (and this lane reported it).
  auto submit = [&]() -> bool {
    if (!hasForming)
      return true;
    hasForming = false;
    auto pending = store.start(forming.write, forming.offset, forming.segments);
    if (!pending) {
      fail(lane, forming.members.front(), pending.takeError());
      return false;
    }
    forming.pending = std::move(*pending);
    inFlightBytes += forming.span;
    inFlight.push_back(std::move(forming));
    forming = Group();
    return true;
  };
  auto retireOldest = [&]() -> bool {
    Group &g = inFlight.front();
    if (llvm::Error err = g.pending->wait()) {
      fail(lane, g.members.front(), std::move(err));
      return false;
    }
    for (unsigned m : g.members) {
      (g.write ? lane.stats.bytes.nvmeWrite : lane.stats.bytes.nvmeRead) +=
          prepared[m].copyBytes;
      completed(m);
    }
    inFlightBytes -= g.span;
    inFlight.pop_front();
    return true;
  };
  // Submits the held-back writes, in tier order, merged where adjacent.
  auto releaseHeldBack = [&]() -> bool {
    std::sort(heldBack.begin(), heldBack.end(), [&](unsigned a, unsigned b) {
      return prepared[a].nvmeOffset < prepared[b].nvmeOffset;
    });
    for (size_t i = 0; i < heldBack.size();) {
      Group g;
      g.write = true;
      g.offset = prepared[heldBack[i]].nvmeOffset;
      for (; i < heldBack.size(); ++i) {
        NvmeCopyRanges copy = nvmeCopyRanges(prepared[heldBack[i]]);
        // No signal waits on these: a run of adjacent writes goes out whole.
        if (!g.members.empty() && copy.tier.begin != g.offset + g.span)
          break;
        g.segments.push_back({hostOf(copy), copy.tier.end - copy.tier.begin});
        g.add(heldBack[i], copy);
      }
      auto pending = store.start(true, g.offset, g.segments);
      if (!pending) {
        fail(lane, g.members.front(), pending.takeError());
        return false;
      }
      g.pending = std::move(*pending);
      behind.push_back(std::move(g));
    }
    heldBack.clear();
    heldBackBytes = 0;
    return true;
  };
  // Waits for every held-back write.
  auto settleBehind = [&]() -> bool {
    if (!heldBack.empty() && !releaseHeldBack())
      return false;
    bool ok = true;
    for (Group &g : behind) {
      llvm::Error err = g.pending->wait();
      if (err && ok) {
        fail(lane, g.members.front(), std::move(err));
        ok = false;
      }
      llvm::consumeError(std::move(err));
      if (!ok)
        continue;
      for (unsigned m : g.members) {
        lane.stats.bytes.nvmeWrite += prepared[m].copyBytes;
        completed(m);
      }
    }
    behind.clear();
    return ok;
  };
  auto drain = [&]() -> bool {
    if (!submit())
      return false;
    while (!inFlight.empty())
      if (!retireOldest())
        return false;
    return settleBehind();
  };
  // After a failure: nothing more is signalled, but no transfer may still
  // be writing into host memory when the lane returns.
  auto abandon = [&] {
    for (Group &g : inFlight)
      llvm::consumeError(g.pending->wait());
    for (Group &g : behind)
      if (g.pending)
        llvm::consumeError(g.pending->wait());
  };

  for (unsigned index : lane.instructions) {
    PreparedInstruction &inst = prepared[index];
    bool isWrite = inst.copyKind == CopyKind::NvmeWrite;
    bool pipelined = inst.kind == InstructionKind::Copy && inst.nvmeDirect &&
                     inst.copyBytes > 0 && !skips(inst) &&
                     (isWrite || inst.copyKind == CopyKind::NvmeRead);
    if (!pipelined) {
      // Bounce-buffered copies share one staging buffer, and anything else
      // runs as every other lane runs it: alone. A skipped copy too: its
      // signal says everything before it on the stream is done, so what is
      // in flight lands first.
      if (!drain() || !waitFor(lane, inst))
        return abandon();
      started(index);
      if (llvm::Error err = execute(inst, index, lane.stats)) {
        fail(lane, index, std::move(err));
        return abandon();
      }
      completed(index);
      continue;
    }

    // What it waits for may itself wait for a copy queued here: complete
    // those, oldest first, until it may go.
    while (!readyNow(inst)) {
      if (!submit())
        return abandon();
      if (inFlight.empty()) {
        if (!waitFor(lane, inst))
          return abandon();
        break;
      }
      if (!retireOldest())
        return abandon();
    }
    if (failed.load())
      return abandon();

    NvmeCopyRanges copy = nvmeCopyRanges(inst);
    uint64_t span = copy.tier.end - copy.tier.begin;
    // Held-back writes it depends on go first (NvmeWriteBehind.cpp counts
    // on this rule being nvmeCopiesConflict).
    bool dependsOnBehind =
        llvm::any_of(heldBack,
                     [&](unsigned m) {
                       return nvmeCopiesConflict(nvmeCopyRanges(prepared[m]),
                                                 copy);
                     }) ||
        llvm::any_of(behind, [&](const Group &g) { return g.conflicts(copy); });
    if (dependsOnBehind && !settleBehind())
      return abandon();
    if (hasForming && forming.conflicts(copy) && !submit())
      return abandon();
    size_t lastConflict = inFlight.size();
    for (size_t i = 0; i < inFlight.size(); ++i)
      if (inFlight[i].conflicts(copy))
        lastConflict = i;
    if (lastConflict < inFlight.size())
      for (size_t i = 0; i <= lastConflict; ++i)
        if (!retireOldest())
          return abandon();

    // Nothing waits for it but the step's end: hold it back, once nothing
    // in flight that it depends on remains.
    if (inst.nvmeWriteBehind) {
      heldBack.push_back(index);
      heldBackBytes += span;
      started(index);
      if (heldBackBytes >= kWriteBehindBytes && !releaseHeldBack())
        return abandon();
      continue;
    }
    // Adjacent either way: write-backs often run in the reverse order of
    // the reads that brought the same tensors in.
    bool canGrow = hasForming && forming.write == isWrite &&
                   forming.span + span <= kMaxGroupBytes;
    bool appends = canGrow && forming.offset + forming.span == copy.tier.begin;
    bool prepends = canGrow && !appends && copy.tier.end == forming.offset;
    if (!appends && !prepends) {
      if (!submit())
        return abandon();
      forming.write = isWrite;
      forming.offset = copy.tier.begin;
      hasForming = true;
    }
    // Whole sectors: the host extent of a direct copy holds them.
    if (prepends) {
      forming.offset = copy.tier.begin;
      forming.segments.insert(forming.segments.begin(), {hostOf(copy), span});
    } else {
      forming.segments.push_back({hostOf(copy), span});
    }
    forming.add(index, copy);
    started(index);

    while (!inFlight.empty() &&
           (inFlightBytes + forming.span > kMaxInFlightBytes ||
            inFlight.size() >= kMaxInFlightGroups))
      if (!retireOldest())
        return abandon();
  }
  if (!drain())
    return abandon();
}

} // namespace zinc::rt
