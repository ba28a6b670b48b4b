//===- TierLayout.h - Live intervals and static offsets per memory tier ---===//
//
// The heap-simulator view of a scheduled graph: time is the index of a node
// in program order; a value is live from the node that first touches it to
// the last one (the whole step for persistent values); each tier's values are
// packed into one arena, with each kernel stream's workspace (the scratch of
// its kernels, KernelWorkspace.h) as one more buffer live the whole step.
// allocate checks the result against the capacities, emit writes it into
// the plan, and both call this one function so they cannot disagree.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_PASSES_TIERLAYOUT_H
#define ZINC_PASSES_TIERLAYOUT_H

#include "zinc/ir/Graph.h"
#include "zinc/ir/ValueTable.h"
#include "zinc/passes/ArenaLayout.h"
#include <vector>

namespace zinc {

/// Byte alignment of every buffer in a tier: 4096 where O_DIRECT NVMe
/// transfers may touch it (CPU and NVMe), 64 on the GPU.
uint64_t tierAlignment(ir::Tier t);

/// Values the whole step needs: inputs, initializers, state, graph outputs.
bool isPersistent(const ir::Graph &g, const ir::Value &v);

/// ir::Stream's enumerators.
constexpr unsigned kNumStreams = 6;

/// The tier a stream's kernels work in, and so its workspace's: the CPU
/// for host, the GPU for the others.
ir::Tier workspaceTier(ir::Stream s);

/// Bytes of kernel workspace each stream needs (index by ir::Stream): the
/// most any one of its nodes' cpu kernels takes (kernelWorkspaceBytes).
void kernelWorkspaces(const ir::Graph &g, uint64_t (&bytes)[kNumStreams]);

struct TierLayout {
  /// Live interval of every value, by value.
  ir::ValueTable<BufferInterval> intervals;
  /// Offset of every value in its tier's arena.
  ir::ValueTable<uint64_t> offsets;
  /// Proven peak of each tier (index by ir::Tier).
  uint64_t peak[3] = {0, 0, 0};
  /// The most bytes live at one instant in each tier: no packing can do
  /// better, so peak - liveBound is the fragmentation.
  uint64_t liveBound[3] = {0, 0, 0};
  /// The node index where each tier's live bytes are highest.
  int64_t peakTime[3] = {0, 0, 0};
  /// Each stream's kernel workspace (index by ir::Stream): its bytes (0 for
  /// none) and offset in workspaceTier(stream).
  uint64_t workspaceBytes[kNumStreams] = {};
  uint64_t workspaceOffset[kNumStreams] = {};
  /// The tiers packed (index by ir::Tier): offsets, peak, live bound and
  /// peak time of the others are empty.
  bool packed[3] = {false, false, false};
  /// Each packed tier's values, in the order they were packed.
  std::vector<const ir::Value *> members[3];

  bool complete() const { return packed[0] && packed[1] && packed[2]; }
};

/// Live intervals of every value, and the packing of the tiers listed
/// (offsets, peak, live bound and peak time of the others stay empty): the
/// spill pass packs only the GPU tier.
TierLayout computeTierLayout(const ir::Graph &g,
                             llvm::ArrayRef<ir::Tier> tiers = {ir::Tier::Gpu, ir::Tier::Cpu,
                                                               ir::Tier::Nvme});

/// computeTierLayout(g, {tier}) with each stream's workspace given (what
/// kernelWorkspaces(g) says): spill's rounds add copies and copies of
/// kernels already there, so the workspaces stay what they were, and a walk
/// over every node's op is saved each round. A tier whose live bytes alone
/// exceed `capacity` is left unpacked (no packing could fit it): packed
/// false, its live bound and peak time set. Spill's first sweep needs only
/// the intervals, and a 10^6-buffer tier far over its capacity takes
/// seconds to pack.
TierLayout layoutTierWithin(const ir::Graph &g, ir::Tier tier,
                            const uint64_t (&workspaces)[kNumStreams],
                            uint64_t capacity = UINT64_MAX);

/// Copies the packings of the tiers `from` packed into `into`; both are
/// layouts of `g` as it is now.
void takePackedTiers(TierLayout &into, const TierLayout &from, const ir::Graph &g);

/// computeTierLayout(g) from `partial`, an earlier layout of some tiers of
/// `g` (spill's): a tier it packed whose members, their live intervals and
/// its workspaces are unchanged is kept (tiers pack independently, so that
/// is what packing it again would give), the others are packed.
TierLayout completeTierLayout(const ir::Graph &g, const TierLayout &partial);

} // namespace zinc

#endif
