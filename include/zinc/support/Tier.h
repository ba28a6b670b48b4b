//===- Tier.h - The memory tiers and how text spells them -----------------===//
#ifndef ZINC_SUPPORT_TIER_H
#define ZINC_SUPPORT_TIER_H

#include "llvm/ADT/Optional.h"
#include "llvm/ADT/StringRef.h"

namespace zinc {

/// A memory tier, fastest first. The IR's tiers (ir::Tier) are these, and
/// the plan's Tier enum (Plan.proto) numbers them the same way.
enum class MemoryTier { Gpu, Cpu, Nvme };

/// "gpu", "cpu", "nvme": the one spelling of a tier in the IR text, plans'
/// dumps, reports, diagnostics and flags.
llvm::StringRef tierName(MemoryTier t);
/// Inverse of tierName.
llvm::Optional<MemoryTier> parseTierName(llvm::StringRef name);

} // namespace zinc

#endif
