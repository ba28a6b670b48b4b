//===- Size.cpp - Byte sizes with binary and decimal units ----------------===//
#include "zinc/support/Size.h"
#include "zinc/support/Error.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"
#include <cmath>

namespace zinc {

llvm::Expected<uint64_t> parseSize(llvm::StringRef text) {
  llvm::StringRef s = text.trim();
  size_t numberEnd = s.find_first_not_of("0123456789.");
  llvm::StringRef number = s.substr(0, numberEnd);
  llvm::StringRef unit = s.substr(std::min(numberEnd, s.size())).trim();
  double multiplier = llvm::StringSwitch<double>(unit)
                          .Cases("", "B", 1.0)
                          .Case("KiB", 1024.0)
                          .Case("MiB", 1024.0 * 1024)
                          .Case("GiB", 1024.0 * 1024 * 1024)
                          .Case("TiB", 1024.0 * 1024 * 1024 * 1024)
                          .Case("KB", 1e3)
                          .Case("MB", 1e6)
                          .Case("GB", 1e9)
                          .Case("TB", 1e12)
                          .Default(0);
  auto bad = [&]() {
    return makeError("invalid size '" + text +
                     "' (expected e.g. 4096, 512MiB, 8GiB or 1.5TB)");
  };
  if (number.empty() || multiplier == 0 || number.count('.') > 1)
    return bad();
  uint64_t whole = 0;
  if (!number.contains('.')) {
    if (number.getAsInteger(10, whole))
      return bad();
    double total = static_cast<double>(whole) * multiplier;
    if (total >= 1.8e19)
      return bad();
    // Exact for integers: avoid double rounding of e.g. 8GiB.
    return whole * static_cast<uint64_t>(multiplier);
  }
  double value = 0;
  if (number.getAsDouble(value) || value * multiplier >= 1.8e19)
    return bad();
  return static_cast<uint64_t>(std::floor(value * multiplier));
}

std::string formatSize(uint64_t bytes) {
  static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 5) {
    v /= 1024;
    ++u;
  }
  std::string out;
  llvm::raw_string_ostream os(out);
  if (u == 0)
    os << bytes << " B";
  else
    os << llvm::format("%.2f ", v) << units[u];
  return os.str();
}

} // namespace zinc
