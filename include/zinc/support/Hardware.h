//===- Hardware.h - What one rank's machine offers: tiers, rates, links ---===//
//
// A hardware description (--hw): the capacities the memory planner proves
// against, and the rates the cost model (plan/PlanSimulator.h) prices work
// with. Presets are the documented JSON files in hw/ (each field with its
// source), compiled in; `cpu` is this machine. docs/hardware.md describes
// the format.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_SUPPORT_HARDWARE_H
#define ZINC_SUPPORT_HARDWARE_H

#include "llvm/ADT/Optional.h"
#include "llvm/Support/Error.h"
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace zinc {

/// Measured times of one kernel: (elements, seconds) pairs, elements
/// increasing.
using KernelTimePoints = std::vector<std::pair<double, double>>;

/// Capacities in bytes per rank (one GPU and its share of the host);
/// bandwidths in bytes/s, compute in FLOP/s, latencies in seconds. Rates
/// marked "per node" are shared by the node's ranks.
struct Hardware {
  std::string name;
  uint64_t gpuMem = 0;
  uint64_t cpuMem = 0;
  uint64_t nvmeMem = 0;
  unsigned gpusPerNode = 1;
  /// Dense FLOP/s of one GPU in fp32, and in fp16/bf16 (tensor cores).
  double gpuFlopsFp32 = 0;
  double gpuFlopsHalf = 0;
  double gpuMemBandwidth = 0;
  /// What one kernel costs beyond its work (launch, bookkeeping), and what
  /// a matrix product costs beyond its FLOPs (its library's fixed cost:
  /// blocking, packing, threading), which small products feel.
  double kernelLaunchSeconds = 0;
  double gemmLaunchSeconds = 0;
  /// What an instruction pays, beyond its own cost, when it has to wait
  /// for an event another stream signals (the waiting stream's wake-up).
  double eventWaitSeconds = 0;
  /// Whether transfers run on engines of their own beside compute (a GPU's
  /// copy engines), rather than on the cores compute runs on (the cpu
  /// backend's copies and I/O threads share its cores). Only then does
  /// moving compute into a transfer's wait gain what the simulation, which
  /// runs streams side by side, predicts (HoistIntoStalls.h).
  bool copyEngines = false;
  /// Without copy engines: what compute loses each time an instruction of
  /// another stream runs on its cores, beyond that instruction's own time
  /// (the switch, and the team waiting for the thread it lent). Zero in
  /// the GPU presets.
  double preemptionSeconds = 0;
  /// One host link (PCIe), each way; `gpusPerHostLink` GPUs share it.
  double hostToDeviceBandwidth = 0;
  double deviceToHostBandwidth = 0;
  unsigned gpusPerHostLink = 1;
  /// Per node.
  double cpuMemBandwidth = 0;
  double cpuAdamParamsPerSecond = 0;
  double nvmeReadBandwidth = 0;
  double nvmeWriteBandwidth = 0;
  /// What a request to an idle NVMe tier pays beyond its bytes (the
  /// device's latency, which a queue of requests hides): a lone burst, such
  /// as the write-backs the lane holds for the step's end, runs well below
  /// the sequential rate. Zero in the presets (their transfers are GBs).
  double nvmeReadLatencySeconds = 0;
  double nvmeWriteLatencySeconds = 0;
  /// Per GPU: the bus bandwidth of a ring collective and the latency of one
  /// of its steps, within a node and across nodes.
  double intraNodeBandwidth = 0;
  double intraNodeLatency = 0;
  double interNodeBandwidth = 0;
  double interNodeLatency = 0;
  /// Kernels that their FLOPs and bytes misprice (row kernels with
  /// transcendental math or short rows: GELU, softmax, LayerNorm and their
  /// gradients, on a CPU), by op name, as `zinc-run --calibrate` timed them
  /// beyond the launch. Empty in the GPU presets.
  std::map<std::string, KernelTimePoints, std::less<>> kernelTimes;
  /// fp32 matrix products as `zinc-run --calibrate` timed them beyond the
  /// launch: (FLOPs, seconds) pairs. A CPU's GEMM reaches its peak rate only
  /// at large sizes; a product of a few MFLOP runs at a third of it. Empty
  /// in the GPU presets, where gemmLaunchSeconds and the peak rate price
  /// products.
  KernelTimePoints productTimes;

  /// The per-rank share of the node's rates when `ranks` ranks run the
  /// same plan at once (ZeRO's ranks are symmetric): NVMe, CPU memory and
  /// host links are divided among the ranks that share them.
  unsigned ranksPerNode(unsigned ranks) const;
  double h2dPerRank(unsigned ranks) const;
  double d2hPerRank(unsigned ranks) const;
  double nvmeReadPerRank(unsigned ranks) const;
  double nvmeWritePerRank(unsigned ranks) const;
  double cpuMemBandwidthPerRank(unsigned ranks) const;
  double cpuAdamPerRank(unsigned ranks) const;

  /// What one GPU kernel costs: its FLOPs at the rate of its precision or
  /// its operand bytes at HBM bandwidth, whichever takes longer, plus the
  /// launch (a matrix product's, for a `product`). An fp32 product is
  /// priced by productTimes when they were measured. The cost model's and
  /// the prefetch scheduler's one formula.
  double kernelSeconds(double flops, double bytes, bool half, bool product = false) const;
  /// What one `op` kernel over `elements` (its largest operand) takes, the
  /// launch included, when kernelTimes has it: linear between the measured
  /// points, proportional to the elements beyond them. None otherwise.
  llvm::Optional<double> measuredKernelSeconds(llvm::StringRef op, double elements) const;
  /// What an fp32 product of `flops` takes by productTimes (non-empty),
  /// beyond the launch: linear between the measured points; below the
  /// first, linear from gemmLaunchSeconds at no FLOPs; beyond the last, its
  /// time plus the extra FLOPs at gpuFlopsFp32 (the peak, which large
  /// products approach).
  double measuredProductSeconds(double flops) const;
};

/// A preset name (`hardwarePresetNames()`) or a JSON file of the format of
/// hw/*.json; a file's missing fields keep this machine's (`cpu`) values.
llvm::Expected<Hardware> loadHardware(llvm::StringRef presetOrFile);

/// A description as JSON text (`where` names it in errors), over this
/// machine's values.
llvm::Expected<Hardware> parseHardwareJson(llvm::StringRef text, llvm::StringRef where);

/// The preset names --hw accepts, `cpu` first.
std::vector<std::string> hardwarePresetNames();

/// `hw` as a JSON description that loadHardware reads back.
std::string hardwareToJson(const Hardware &hw);

} // namespace zinc

#endif
