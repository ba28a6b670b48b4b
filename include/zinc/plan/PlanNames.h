//===- PlanNames.h - A plan's tiers, streams and quantities as text -------===//
#ifndef ZINC_PLAN_PLANNAMES_H
#define ZINC_PLAN_PLANNAMES_H

#include <cstdint>
#include <string>

namespace zinc::plan {

/// "compute", "h2d", "d2h", "nvme", "collective", "host"; "stream N" for a
/// number no stream has (a corrupt plan). Dumps, traces, diagnostics and
/// the predicted timeline all name streams this way.
std::string streamName(int stream);

/// "gpu", "cpu", "nvme" (zinc/support/Tier.h); "tier N" for a number no
/// tier has (a corrupt plan).
std::string tierName(int tier);

/// "256 B", "832.2 KiB", "1.35 MiB", "29.26 GiB", "1.59 TiB".
std::string bytesText(double bytes);

/// "6.0 us", "1.85 ms", "2.70 s"; `decimals` of ms and s (one fewer of us).
std::string secondsText(double seconds, unsigned decimals = 2);

} // namespace zinc::plan

#endif
