//===- LeadWalk.h - Where a timed prefetch is issued, in O(block) a copy --===//
//
// insert-transfers issues a prefetch where the compute before its user
// covers the copy's own time (times the lead), walking back from the user
// node by node; with the link's queue counted, every copy on the link it
// passes adds to what must be covered, so on a long queue the walk runs to
// its cap of kMaxLeadWalk nodes for each copy. This index makes the same
// walk cheap: the program, as insert-transfers found it, is cut into blocks
// of kBlock nodes (plus the copies inserted among them), each with the
// seconds of its compute by stream and of its copies by link, so the walk
// passes a whole block at once when the block cannot hold its end.
//
// The result is the node-by-node walk's, exactly: a block is passed only
// when even all of its compute cannot cover what is needed, by a margin
// far above the rounding of sums taken in another order; where the sums
// come that close to deciding, the walk is done again node by node.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_PASSES_LEADWALK_H
#define ZINC_PASSES_LEADWALK_H

#include "zinc/ir/Graph.h"
#include "zinc/support/Hardware.h"
#include "llvm/ADT/DenseMap.h"
#include <array>
#include <vector>

namespace zinc::passes {

class LeadWalk {
public:
  /// Snapshot nodes per block: the walk steps through at most about two
  /// blocks node by node.
  static constexpr unsigned kBlock = 32;

  /// One walk back from `user`: stops at the first node where the compute
  /// passed covers `need` (which grows by each copy on `link` passed when
  /// `countsQueue`), before reaching `stop`, or after `maxWalk` nodes.
  /// Compute is what runs on the compute stream or on the user's own.
  struct Query {
    ir::Node *user = nullptr;
    const ir::Node *stop = nullptr;
    ir::Stream link = ir::Stream::Nvme;
    double need = 0;
    bool countsQueue = false;
    unsigned maxWalk = 0;
  };

  /// Indexes the nodes of `g` as they are now (the snapshot); `ranks` and
  /// `hw` price them as NodeCost.h does.
  LeadWalk(const ir::Graph &g, const Hardware &hw);

  /// Snapshot node `n` will not change its stream, operands or cost again
  /// (insert-transfers has lowered it): its seconds join its block. A block
  /// is passed whole only once all of its snapshot nodes are final.
  void finalize(const ir::Node &n);
  /// Transfer `n` (its stream and operands set) was inserted just before
  /// `before` (null: at the end).
  void inserted(const ir::Node &n, const ir::Node *before);

  /// Where the walk of `q` stops.
  ir::Node *walk(const Query &q) const;
  /// The same walk node by node: the reference `walk` must agree with.
  ir::Node *walkNodeByNode(const Query &q) const;

  /// Predicted seconds of a transfer node on its link.
  double transferSeconds(const ir::Node &copy) const;
  /// Walks that came too near a tie and were done node by node.
  size_t retries() const { return retried; }

private:
  struct NodeInfo {
    unsigned block = 0;
    bool transfer = false;
    /// Whether `seconds` holds a final non-transfer node's nodeSeconds.
    bool priced = false;
    double seconds = 0;
  };
  static constexpr unsigned kStreams =
      static_cast<unsigned>(ir::Stream::Host) + 1;
  struct Block {
    /// Non-transfer nodes' seconds by stream; transfers' seconds by stream.
    std::array<double, kStreams> compute{};
    std::array<double, kStreams> copies{};
    /// Nodes in the block (snapshot and inserted), and snapshot nodes not
    /// yet final.
    unsigned nodes = 0;
    unsigned pending = 0;
  };
  /// The walk's running state.
  struct State {
    ir::Node *at;
    unsigned walked = 0;
    double covered = 0;
    double need = 0;
    /// Whether covered and need are the node-by-node sums (no block passed).
    bool exact = true;
  };
  enum class Step { Moved, Stopped, Tie };

  Step step(const Query &q, State &s) const;
  double coveredIn(const Block &b, ir::Stream userStream) const;
  ir::Node *firstNodeOf(unsigned block) const;

  const ir::Graph &g;
  const Hardware &hw;
  std::vector<ir::Node *> snapshot;
  std::vector<Block> blocks;
  llvm::DenseMap<const ir::Node *, NodeInfo> info;
  mutable size_t retried = 0;
};

} // namespace zinc::passes

#endif
