//===- Literals.h - Numbers and tensor bytes of the IR text form ----------===//
//
// Conversions from a token's text to the exact value the printer started
// from. They return a message without a location; the parser adds it.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_COMPILER_IR_LITERALS_H
#define ZINC_COMPILER_IR_LITERALS_H

#include "zinc/support/DType.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include <cstdint>
#include <vector>

namespace zinc::ir::text {

/// A decimal integer.
llvm::Expected<int64_t> parseInt64(llvm::StringRef tok);
/// A non-negative decimal integer (byte offsets and lengths).
llvm::Expected<uint64_t> parseUInt64(llvm::StringRef tok);
/// A decimal, inf, -inf, or 0x followed by the 16 hex digits of the bits.
llvm::Expected<double> parseDouble(llvm::StringRef tok);
/// Appends one element of type `t`, little-endian, to `bytes`.
llvm::Error appendElement(DType t, llvm::StringRef tok,
                          std::vector<uint8_t> &bytes);
/// "0x" followed by two hex digits per byte.
llvm::Expected<std::vector<uint8_t>> parseHexBytes(llvm::StringRef s);

} // namespace zinc::ir::text

#endif
