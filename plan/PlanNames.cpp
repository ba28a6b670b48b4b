//===- PlanNames.cpp - A plan's tiers, streams and quantities as text -----===//
#include "zinc/plan/PlanNames.h"
#include "Plan.pb.h"
#include "zinc/support/Tier.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FormatVariadic.h"

namespace zinc::plan {

std::string streamName(int stream) {
  if (!Stream_IsValid(stream))
    return "stream " + std::to_string(stream);
  // STREAM_COMPUTE -> compute.
  return llvm::StringRef(Stream_Name(static_cast<Stream>(stream))).drop_front(7).lower();
}

// The plan numbers the tiers as MemoryTier does, so a tier is a cast.
static_assert(TIER_GPU == static_cast<int>(MemoryTier::Gpu) &&
                  TIER_CPU == static_cast<int>(MemoryTier::Cpu) &&
                  TIER_NVME == static_cast<int>(MemoryTier::Nvme),
              "Plan.proto's Tier and MemoryTier must number the tiers alike");

std::string tierName(int tier) {
  if (!Tier_IsValid(tier))
    return "tier " + std::to_string(tier);
  return zinc::tierName(static_cast<MemoryTier>(tier)).str();
}

std::string bytesText(double bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 4) {
    bytes /= 1024;
    ++unit;
  }
  const char *format = unit == 0 ? "{0:f0} {1}" : unit == 1 ? "{0:f1} {1}" : "{0:f2} {1}";
  return llvm::formatv(format, bytes, units[unit]).str();
}

std::string secondsText(double s, unsigned decimals) {
  auto in = [&](double value, llvm::StringRef unit, unsigned places) {
    std::string format = "{0:f" + std::to_string(places) + "} {1}";
    return llvm::formatv(format.c_str(), value, unit).str();
  };
  if (s >= 1)
    return in(s, "s", decimals);
  if (s >= 1e-3)
    return in(s * 1e3, "ms", decimals);
  return in(s * 1e6, "us", decimals > 1 ? decimals - 1 : decimals);
}

} // namespace zinc::plan
