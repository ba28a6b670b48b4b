//===- BucketCollectives.h - Several small collectives as one -------------===//
//
// Every ZeRO collective of the partition pass moves one tensor, and each
// pays the link's latency once per ring step: on 16 ranks over InfiniBand,
// a LayerNorm's 8 KiB weight costs as much as 2 MiB of a large one.
// Bucketing merges collectives of one kind that the plan issues close
// together into one node over all their tensors, which the runtime issues
// as one group (one NCCL launch; MPI requests in flight together), so the
// latency is paid once per bucket. The simulation chooses the bucket size
// (compiler/planning/SearchDriver.cpp); `zinc-compile --bucket-bytes` overrides it.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_PASSES_BUCKETCOLLECTIVES_H
#define ZINC_PASSES_BUCKETCOLLECTIVES_H

#include "zinc/ir/Graph.h"
#include "zinc/support/Hardware.h"
#include <cstdint>
#include <vector>

namespace zinc::passes {

/// Merges `g`'s AllGather, ReduceScatter and AllReduce nodes into buckets of
/// at most `capBytes` (the whole tensors' bytes, summed; a larger tensor
/// stays alone), one kind, reduction and dtype to a bucket:
///   - gathers move up to their bucket's first member, which must see their
///     shards complete (no write of a shard in between);
///   - reductions move down to their bucket's last member, which must come
///     before anything reads their results or touches their operands.
/// The merged node keeps the members' operands in order: input i goes to
/// output i (AllReduce: input i is reduced in place). Returns the number of
/// collectives merged away. O(nodes + uses).
size_t bucketCollectives(ir::Graph &g, uint64_t capBytes);

/// The bucket sizes the search tries on `hw` for `ranks` ranks: multiples of
/// the bytes whose transfer takes as long as the collective's latency (so a
/// bucket of n of them spends 1/(n+1) of its time on latency), ascending;
/// none for one rank.
std::vector<uint64_t> bucketSizesToTry(const Hardware &hw, unsigned ranks);

} // namespace zinc::passes

#endif
