//===- Hardware.cpp - Hardware presets and JSON descriptions --------------===//
#include "zinc/support/Hardware.h"
#include "zinc/support/Error.h"
#include "zinc/support/Size.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include <unistd.h>

namespace zinc {

static constexpr uint64_t GiB = 1ull << 30;
static constexpr uint64_t TB = 1000ull * 1000 * 1000 * 1000;

/// "cpu": this machine. The GPU tier is emulated in host memory by the cpu
/// backend, so the physical memory is split between the two tiers.
static Hardware thisMachine() {
  Hardware hw;
  hw.name = "cpu";
  uint64_t physical = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) *
                      static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  hw.gpuMem = physical / 4;
  hw.cpuMem = physical / 2;
  hw.nvmeMem = 1 * TB;
  hw.gpuFlops = hw.cpuFlops = 50e9;
  hw.gpuMemBandwidth = 10e9;
  hw.hostToDeviceBandwidth = 10e9;
  hw.nvmeBandwidth = 1e9;
  hw.networkBandwidth = 5e9;
  return hw;
}

static llvm::Optional<Hardware> preset(llvm::StringRef name) {
  if (name == "cpu")
    return thisMachine();
  // Per GPU: the node's host memory and NVMe divided by its GPUs; peak dense
  // fp16/bf16 tensor FLOP/s; PCIe/NVLink-to-host and NVMe as measured in the
  // ZeRO-Infinity paper's setups.
  if (name == "dgx2-v100")
    return Hardware{"dgx2-v100", 32 * GiB, 1536 * GiB / 16, 28 * TB / 16,
                    125e12, 1e12, 900e9, 12e9, 1.6e9, 12.5e9};
  if (name == "dgx-a100-80g")
    return Hardware{"dgx-a100-80g", 80 * GiB, 2048 * GiB / 8, 30 * TB / 8,
                    312e12, 2e12, 2039e9, 25e9, 3e9, 25e9};
  if (name == "h100-sxm")
    return Hardware{"h100-sxm", 80 * GiB, 2048 * GiB / 8, 30 * TB / 8,
                    989e12, 3e12, 3350e9, 50e9, 6e9, 50e9};
  return llvm::None;
}

llvm::Expected<Hardware> loadHardware(llvm::StringRef presetOrFile) {
  if (auto hw = preset(presetOrFile))
    return *hw;
  if (!presetOrFile.endswith(".json"))
    return makeError("unknown hardware '" + presetOrFile +
                     "' (presets: cpu, dgx2-v100, dgx-a100-80g, h100-sxm; or a .json file)");
  auto buf = llvm::MemoryBuffer::getFile(presetOrFile);
  if (!buf)
    return makeError(presetOrFile + ": cannot open: " + buf.getError().message());
  auto json = llvm::json::parse((*buf)->getBuffer());
  if (!json)
    return makeError(presetOrFile + ": not JSON: " + llvm::toString(json.takeError()));
  const llvm::json::Object *o = json->getAsObject();
  if (!o)
    return makeError(presetOrFile + ": expected a JSON object");
  Hardware hw = thisMachine();
  hw.name = o->getString("name").getValueOr(presetOrFile).str();
  for (auto [key, field] : {std::pair{"gpu_mem", &hw.gpuMem},
                            std::pair{"cpu_mem", &hw.cpuMem},
                            std::pair{"nvme_mem", &hw.nvmeMem}}) {
    const llvm::json::Value *v = o->get(key);
    if (!v)
      continue;
    if (auto n = v->getAsUINT64()) {
      *field = *n;
    } else if (auto s = v->getAsString()) {
      auto size = parseSize(*s);
      if (!size)
        return addContext(size.takeError(), presetOrFile + ": " + key);
      *field = *size;
    } else {
      return makeError(presetOrFile + ": " + key + " must be a size");
    }
  }
  for (auto [key, field] : {std::pair{"gpu_flops", &hw.gpuFlops},
                            std::pair{"cpu_flops", &hw.cpuFlops},
                            std::pair{"gpu_mem_bandwidth", &hw.gpuMemBandwidth},
                            std::pair{"h2d_bandwidth", &hw.hostToDeviceBandwidth},
                            std::pair{"nvme_bandwidth", &hw.nvmeBandwidth},
                            std::pair{"network_bandwidth", &hw.networkBandwidth}})
    if (auto n = o->getNumber(key))
      *field = *n;
  return hw;
}

} // namespace zinc
