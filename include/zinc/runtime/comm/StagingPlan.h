//===- StagingPlan.h - The chunks of a collective staged through the host -===//
//
// Plain host code (no CUDA), unit-tested without a GPU. A collective over
// device memory without NCCL goes device -> pinned host -> MPI -> device. It
// is cut into chunks that cycle through a few pinned staging slots, so the
// copy of one chunk overlaps the MPI exchange of another: the plan below is
// the order a rank issues the three steps of every chunk in. Copies queue on
// one CUDA stream and so complete in issue order; the exchange is the host's
// and starts once its chunk's copy to the host has completed.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_COMM_STAGINGPLAN_H
#define ZINC_RUNTIME_COMM_STAGINGPLAN_H

#include <cstdint>
#include <vector>

namespace zinc::comm {

/// Elements [begin, begin + count) of every rank's part of the collective,
/// through staging slot `slot`.
struct StagedChunk {
  int64_t begin = 0;
  int64_t count = 0;
  unsigned slot = 0;
};

enum class StageStepKind {
  ToHost,   ///< queue the chunk's copy from the device into its slot
  Exchange, ///< wait for that copy, then the chunk's MPI collective
  ToDevice, ///< queue the copy of the result from the slot to the device
};

struct StageStep {
  StageStepKind kind;
  unsigned chunk;
};

struct StagingPlan {
  std::vector<StagedChunk> chunks;
  /// In issue order: every chunk's ToHost, Exchange, ToDevice in that
  /// order; exchanges in chunk order (every rank issues the same MPI calls
  /// in the same order); a slot's next ToHost only after the ToDevice of its
  /// previous chunk (the stream then completes that copy first).
  std::vector<StageStep> steps;
};

/// The plan for `elements` per rank part, each element taking
/// `slotBytesPerElement` bytes of a slot (the element size for an
/// all-reduce; (ranks + 1) times it for gathers and reduce-scatters, which
/// hold the sent part and every rank's), through `slots` slots of
/// `slotBytes`. Chunks are as large as a slot allows, the last one short.
/// Requires slots >= 1 and a slot holding at least one element.
StagingPlan planStaging(int64_t elements, uint64_t slotBytesPerElement,
                        uint64_t slotBytes, unsigned slots);

} // namespace zinc::comm

#endif
