//===- NvmeWriteBehind.cpp - Which NVMe writes the lane may hold back -----===//
//
// The NVMe lane completes its copies in plan order, because another stream
// that waits for a later copy may count on the earlier ones being done: the
// host stream, say, reusing a written-back staging buffer once the next read
// has signalled. Written back one at a time as the backward pass frees
// them, though, write-backs are short bursts that each pay the device's
// latency; the lane would rather hold them back and write them in batches
// (NvmeLane.cpp). This pass finds the writes for which that changes nothing
// any other stream can see.
//
// A held-back write W completes before the step ends, and before the lane
// submits any later copy L that depends on it (nvmeCopiesConflict, the
// lane's rule: L touches W's sectors, or writes host bytes W reads) or any
// copy the lane runs alone. So W is done before every copy of the lane from the
// first such L on has signalled. W may be held back when it signals nothing and
// every instruction of another stream that comes after it in plan order and
// writes W's host bytes waits, directly, for a signal of a lane copy at or
// after that first L. Anything less direct (a chain of waits through a third
// stream) keeps W in order: the check is sound, not complete.
//
//===----------------------------------------------------------------------===//
#include "ExecutorImpl.h"
#include "NvmeCopyRanges.h"

namespace zinc::rt {

namespace {

struct Touch {
  ByteRange bytes;
  unsigned instruction;
};

bool isDirectNvmeCopy(const PreparedInstruction &inst) {
  return inst.kind == InstructionKind::Copy && inst.nvmeDirect &&
         inst.copyBytes > 0 &&
         (inst.copyKind == CopyKind::NvmeRead ||
          inst.copyKind == CopyKind::NvmeWrite);
}

/// Whether the lane makes `later` wait for the held-back write `w`: the
/// lane's own rule.
bool dependsOn(const PreparedInstruction &later, const PreparedInstruction &w) {
  if (!isDirectNvmeCopy(later))
    return true; // run alone, after every held-back write
  return nvmeCopiesConflict(nvmeCopyRanges(w), nvmeCopyRanges(later));
}

/// How far ahead in the lane the first dependent copy is looked for; past
/// it, a write stays in order (bounds the pass on huge plans).
constexpr size_t kMaxLookahead = 4096;

} // namespace

void markNvmeWriteBehind(Program &program) {
  auto &prepared = program.instructions();
  const Arena &cpu = program.cpuArena();
  uintptr_t lo = reinterpret_cast<uintptr_t>(cpu.base()), hi = lo + cpu.size();

  // The lane, and each instruction's place in it.
  std::vector<unsigned> lane;
  std::vector<int> lanePos(prepared.size(), -1);
  for (unsigned i = 0; i < prepared.size(); ++i)
    if (prepared[i].stream == plan::STREAM_NVME) {
      lanePos[i] = static_cast<int>(lane.size());
      lane.push_back(i);
    }
  // Who gives each event its k-th signal (waits name counts).
  std::vector<std::vector<unsigned>> signallers;
  for (unsigned i = 0; i < prepared.size(); ++i)
    for (uint32_t e : prepared[i].signals) {
      if (e >= signallers.size())
        signallers.resize(e + 1);
      signallers[e].push_back(i);
    }
  // CPU-tier bytes each instruction of another stream writes: a held-back
  // write only reads its host bytes, so other readers never conflict.
  std::vector<Touch> touches;
  auto touch = [&](const void *p, uint64_t bytes, unsigned i) {
    auto at = reinterpret_cast<uintptr_t>(p);
    if (p && bytes && at < hi && at + bytes > lo)
      touches.push_back({{at, at + bytes}, i});
  };
  for (unsigned i = 0; i < prepared.size(); ++i) {
    const PreparedInstruction &inst = prepared[i];
    if (inst.stream == plan::STREAM_NVME)
      continue;
    if (inst.kind == InstructionKind::Copy) {
      touch(inst.copyDst, inst.copyBytes, i);
      continue;
    }
    for (unsigned k = 0; k < inst.inputs.size(); ++k)
      if (inst.inputs[k] && (!inst.effects || inst.effects->writesInput(k)))
        touch(inst.inputs[k]->data, inst.inputs[k]->byteSize(), i);
    for (const cpu::TensorRef *t : inst.outputs)
      if (t)
        touch(t->data, t->byteSize(), i);
    touch(inst.workspace, inst.workspaceBytes, i);
  }
  std::sort(touches.begin(), touches.end(), [](const Touch &a, const Touch &b) {
    return a.bytes.begin < b.bytes.begin;
  });

  // Whether instruction `x` waits directly for a lane copy at or after lane
  // position `from`.
  auto waitsForLaneFrom = [&](const PreparedInstruction &x, size_t from) {
    for (auto [event, count] : x.waits) {
      if (event >= signallers.size() || count == 0 ||
          count > signallers[event].size())
        continue;
      int pos = lanePos[signallers[event][count - 1]];
      if (pos >= 0 && static_cast<size_t>(pos) >= from)
        return true;
    }
    return false;
  };

  for (size_t p = 0; p < lane.size(); ++p) {
    PreparedInstruction &w = prepared[lane[p]];
    w.nvmeWriteBehind = false;
    if (w.copyKind != CopyKind::NvmeWrite || !isDirectNvmeCopy(w) ||
        !w.signals.empty())
      continue;
    size_t firstDependent = lane.size(); // the step's end
    for (size_t q = p + 1; q < lane.size() && q <= p + kMaxLookahead; ++q)
      if (dependsOn(prepared[lane[q]], w)) {
        firstDependent = q;
        break;
      }
    if (firstDependent == lane.size() && lane.size() > p + 1 + kMaxLookahead)
      continue;
    ByteRange mine = nvmeCopyRanges(w).host;
    bool safe = true;
    for (const Touch &t : touches) {
      if (t.bytes.begin >= mine.end)
        break;
      if (!t.bytes.overlaps(mine) || t.instruction < lane[p])
        continue;
      if (!waitsForLaneFrom(prepared[t.instruction], firstDependent)) {
        safe = false;
        break;
      }
    }
    w.nvmeWriteBehind = safe;
  }
}

} // namespace zinc::rt
