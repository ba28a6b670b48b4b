//===- Size.h - Parsing and printing byte sizes ("512MiB", "1.5TB") -------===//
#ifndef ZINC_SUPPORT_SIZE_H
#define ZINC_SUPPORT_SIZE_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include <string>

namespace zinc {

/// An integer or decimal with an optional unit: KiB/MiB/GiB/TiB (powers of
/// 1024), KB/MB/GB/TB (powers of 1000), B or none (bytes). The result is
/// rounded down to whole bytes.
llvm::Expected<uint64_t> parseSize(llvm::StringRef text);

/// "1.50 GiB"-style text for humans (not for parsing back).
std::string formatSize(uint64_t bytes);

} // namespace zinc

#endif
