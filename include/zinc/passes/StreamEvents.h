//===- StreamEvents.h - The events that order a program's streams ---------===//
//
// Each stream of a plan runs its instructions in program order; between
// streams, order comes from events. The plan emitter writes them into the
// plan, and the placement search gives them to the simulation of each
// configuration it tries (SimulationProgram.h): one computation, so the
// search predicts the very waits the plan will have.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_PASSES_STREAMEVENTS_H
#define ZINC_PASSES_STREAMEVENTS_H

#include "zinc/ir/Graph.h"
#include "zinc/passes/TierLayout.h"
#include <cstdint>
#include <future>
#include <utility>
#include <vector>

namespace zinc {

/// The event edges for the plan's instructions, in program order: what
/// each instruction waits for and signals.
struct StreamEvents {
  /// (instruction, event), in the order the instructions list them.
  std::vector<std::pair<uint32_t, uint32_t>> waits, signals;
  unsigned numEvents = 0;
};

/// Event edges: each instruction waits for the latest earlier instruction on
/// every other stream whose bytes conflict with its own (overlapping, one of
/// them writing: data dependences and the reuse of a buffer alike), unless
/// its stream already waited on that one or a later one of that stream.
/// The latest conflict on each stream comes from per-tier shadow memory, so
/// an instruction costs O(log n) per operand and stream, however far back
/// the conflict is; a stream that issued nothing since the instruction's
/// stream last waited on it is not asked (most of them, most of the time).
StreamEvents synchronizeStreams(const ir::Graph &g, const TierLayout &layout);

/// synchronizeStreams on a second thread where the graph is big enough to
/// pay for one (else when the result is asked for), so that the caller
/// writes the instructions meanwhile. `g` and `layout` must outlive it.
std::future<StreamEvents> synchronizeStreamsAsync(const ir::Graph &g,
                                                  const TierLayout &layout);

} // namespace zinc

#endif
