//===- PlanNames.cpp - How a plan's streams and quantities read in text ---===//
#include "zinc/plan/PlanNames.h"
#include "Plan.pb.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FormatVariadic.h"

namespace zinc::plan {

std::string streamName(int stream) {
  if (!Stream_IsValid(stream))
    return "stream " + std::to_string(stream);
  // STREAM_COMPUTE -> compute.
  return llvm::StringRef(Stream_Name(static_cast<Stream>(stream))).drop_front(7).lower();
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

std::string secondsText(double s) {
  if (s >= 1)
    return llvm::formatv("{0:f2} s", s).str();
  if (s >= 1e-3)
    return llvm::formatv("{0:f2} ms", s * 1e3).str();
  return llvm::formatv("{0:f1} us", s * 1e6).str();
}

} // namespace zinc::plan
