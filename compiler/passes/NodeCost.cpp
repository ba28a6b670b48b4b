//===- NodeCost.cpp - What a node of the graph costs on a machine ---------===//
#include "zinc/passes/NodeCost.h"
#include "zinc/passes/NodeFlops.h"
#include "zinc/passes/OptimizerOps.h"
#include "zinc/support/MatMulGeometry.h"

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
  double bytes = 0;
  for (const ir::Value *v : n.inputs)
    if (v)
      bytes += static_cast<double>(v->byteSize());
  for (const ir::Value *v : n.outputs)
    if (v)
      bytes += static_cast<double>(v->byteSize());
  if (n.stream == ir::Stream::Host) {
    if (isOptimizerNode(n) && n.inputs[0])
      return static_cast<double>(n.inputs[0]->numElements()) / hw.cpuAdamPerRank(ranks);
    return bytes / hw.cpuMemBandwidthPerRank(ranks);
  }
  const ir::Value *typed = !n.outputs.empty() && n.outputs[0] ? n.outputs[0]
                           : !n.inputs.empty()                ? n.inputs[0]
                                                              : nullptr;
  bool half = typed && (typed->dtype == DType::F16 || typed->dtype == DType::BF16);
  return hw.kernelSeconds(static_cast<double>(estimateFlops(n)), bytes, half,
                          isMatrixProductOp(n.opType));
}

} // namespace zinc::passes
