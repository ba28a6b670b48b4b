//===- MemoryOptions.h - Where state may live and how much each tier holds -===//
#ifndef ZINC_PASSES_MEMORYOPTIONS_H
#define ZINC_PASSES_MEMORYOPTIONS_H

#include "zinc/ir/Graph.h"
#include <cstdint>
#include <string>
#include <vector>

namespace zinc {

/// --offload-optimizer / --offload-params. The place pass resolves Auto
/// (trying the candidates, cheapest predicted transfers first) into the
/// concrete tiers below, so later passes only ever see concrete tiers.
enum class OffloadPolicy { Auto, None, Cpu, Nvme };

/// --tile: the tile pass picks each operator's tile count (Auto), tiles
/// nothing (None), or gives every tileable large operator `tileCount`
/// tiles (Fixed).
enum class TileMode { Auto, None, Fixed };

/// One operator the tile pass split, for the compile report.
struct TiledNode {
  std::string node;
  std::string op;
  unsigned tiles = 0;
};

struct MemoryOptions {
  TileMode tileMode = TileMode::Auto;
  unsigned tileCount = 0;
  /// Set by the tile pass, in program order.
  std::vector<TiledNode> tiled;
  /// What the user asked for (zinc-compile's flags).
  OffloadPolicy optimizerOffload = OffloadPolicy::None;
  OffloadPolicy paramsOffload = OffloadPolicy::None;
  /// Set by place. Home of the optimizer states and fp32 master weights;
  /// the optimizer update runs on the host when this is not the GPU.
  ir::Tier optimizerTier = ir::Tier::Gpu;
  /// Set by place. Home of the weights the forward and backward passes read.
  ir::Tier paramsTier = ir::Tier::Gpu;
  /// Capacities in bytes; 0 = unbounded.
  uint64_t gpuCapacity = 0;
  uint64_t cpuCapacity = 0;
  uint64_t nvmeCapacity = 0;
  /// How many compute nodes ahead of its use a prefetch is issued.
  unsigned prefetchDistance = 2;
  /// Set by place: how far its search already carried the graph it kept.
  /// The passes up to that point then have nothing to do (and allocate's
  /// layout is in PassContext::layout).
  enum class Placed { Homes, Transfers, Spills, Allocation };
  Placed placedThrough = Placed::Homes;
  /// Set by place when no placement fits the GPU: a capacity it checked
  /// does fit, for allocate's diagnostic to name (0: none was found).
  uint64_t gpuCapacityThatFits = 0;
};

} // namespace zinc

#endif
