//===- NvmeWriteBehind.h - How the NVMe lane batches its write-backs ------===//
//
// Written back one at a time as backward frees them, write-backs are short
// bursts that each pay the device's latency. The runtime's NVMe lane holds
// back the writes no other stream can observe (they signal nothing; see
// runtime/NvmeWriteBehind.cpp for the exact rule) and writes them in
// batches of this many bytes, and at the step's end. Reads later in the lane
// do not queue behind them. The cost model simulates the same batches
// (PlanSimulator.cpp), so both read this one figure.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_PLAN_NVMEWRITEBEHIND_H
#define ZINC_PLAN_NVMEWRITEBEHIND_H

#include <cstdint>

namespace zinc::plan {

inline constexpr uint64_t kNvmeWriteBehindBytes = 64ull << 20;

} // namespace zinc::plan

#endif
