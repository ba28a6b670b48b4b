//===- Tier.cpp - The memory tiers and how text spells them ---------------===//
#include "zinc/support/Tier.h"

namespace zinc {

llvm::StringRef tierName(MemoryTier t) {
  switch (t) {
  case MemoryTier::Gpu:
    return "gpu";
  case MemoryTier::Cpu:
    return "cpu";
  case MemoryTier::Nvme:
    return "nvme";
  }
  return "?";
}

llvm::Optional<MemoryTier> parseTierName(llvm::StringRef name) {
  for (MemoryTier t : {MemoryTier::Gpu, MemoryTier::Cpu, MemoryTier::Nvme})
    if (tierName(t) == name)
      return t;
  return llvm::None;
}

} // namespace zinc
