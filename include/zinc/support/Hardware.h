//===- Hardware.h - What one rank's machine offers: tiers and links -------===//
#ifndef ZINC_SUPPORT_HARDWARE_H
#define ZINC_SUPPORT_HARDWARE_H

#include "llvm/Support/Error.h"
#include <string>

namespace zinc {

/// Per rank (one GPU and its share of the host). Capacities in bytes,
/// bandwidths in bytes/s, compute in FLOP/s.
struct Hardware {
  std::string name;
  uint64_t gpuMem = 0;
  uint64_t cpuMem = 0;
  uint64_t nvmeMem = 0;
  double gpuFlops = 0;
  double cpuFlops = 0;
  double gpuMemBandwidth = 0;
  double hostToDeviceBandwidth = 0;
  double nvmeBandwidth = 0;
  double networkBandwidth = 0;
};

/// A preset name (cpu, dgx2-v100, dgx-a100-80g, h100-sxm) or a JSON file
/// with the same fields ({"name": .., "gpu_mem": "80GiB", ...}).
llvm::Expected<Hardware> loadHardware(llvm::StringRef presetOrFile);

} // namespace zinc

#endif
