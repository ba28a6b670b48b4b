//===- NodeCost.cpp - What a node of the graph costs on a machine ---------===//
#include "zinc/passes/NodeCost.h"
#include "zinc/passes/NodeFlops.h"
#include "zinc/passes/OptimizerOps.h"
#include "zinc/support/MatMulGeometry.h"
#include <algorithm>

namespace zinc::passes {

double copySeconds(uint64_t bytes, ir::Tier from, ir::Tier to, const Hardware &hw,
                   unsigned ranks) {
  double b = static_cast<double>(bytes);
  if (from == ir::Tier::Nvme)
    return b / hw.nvmeReadPerRank(ranks);
  if (to == ir::Tier::Nvme)
    return b / hw.nvmeWritePerRank(ranks);
  return b / (to == ir::Tier::Gpu ? hw.h2dPerRank(ranks) : hw.d2hPerRank(ranks));
}

double nodeSeconds(const ir::Node &n, const Hardware &hw, unsigned ranks) {
  double bytes = 0, largest = 0;
  auto count = [&](const ir::Value *v) {
    if (!v)
      return;
    bytes += static_cast<double>(v->byteSize());
    largest = std::max(largest, static_cast<double>(v->numElements()));
  };
  for (const ir::Value *v : n.inputs)
    count(v);
  for (const ir::Value *v : n.outputs)
    count(v);
  if (n.stream == ir::Stream::Host) {
    if (isOptimizerNode(n) && n.inputs[0])
      return static_cast<double>(n.inputs[0]->numElements()) / hw.cpuAdamPerRank(ranks);
    return bytes / hw.cpuMemBandwidthPerRank(ranks);
  }
  if (auto measured = hw.measuredKernelSeconds(n.opType, largest))
    return *measured;
  const ir::Value *typed = !n.outputs.empty() && n.outputs[0] ? n.outputs[0]
                           : !n.inputs.empty()                ? n.inputs[0]
                                                              : nullptr;
  bool half = typed && (typed->dtype == DType::F16 || typed->dtype == DType::BF16);
  return hw.kernelSeconds(static_cast<double>(estimateFlops(n)), bytes, half,
                          isMatrixProductOp(n.opType));
}

} // namespace zinc::passes
