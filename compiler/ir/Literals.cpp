//===- Literals.cpp - Numbers and tensor bytes of the IR text form --------===//
#include "Literals.h"
#include "zinc/support/Error.h"
#include "zinc/support/Float16.h"
#include "llvm/ADT/StringExtras.h"
#include <charconv>
#include <cstring>
#include <limits>

namespace zinc::ir::text {

llvm::Expected<int64_t> parseInt64(llvm::StringRef tok) {
  int64_t v;
  if (tok.getAsInteger(10, v))
    return makeError("expected an integer, found '" + tok + "'");
  return v;
}

llvm::Expected<uint64_t> parseUInt64(llvm::StringRef tok) {
  uint64_t v;
  if (tok.getAsInteger(10, v))
    return makeError("expected a non-negative integer, found '" + tok + "'");
  return v;
}

static bool isHexBits(llvm::StringRef tok) {
  return tok.startswith("0x") || tok.startswith("0X");
}

template <typename T>
static llvm::Expected<T> parseFloating(llvm::StringRef tok) {
  if (tok == "inf")
    return std::numeric_limits<T>::infinity();
  if (tok == "-inf")
    return -std::numeric_limits<T>::infinity();
  T v;
  auto res = std::from_chars(tok.begin(), tok.end(), v);
  if (res.ec != std::errc() || res.ptr != tok.end() || tok.empty())
    return makeError("expected a floating-point number, found '" + tok + "'");
  return v;
}

llvm::Expected<double> parseDouble(llvm::StringRef tok) {
  if (!isHexBits(tok))
    return parseFloating<double>(tok);
  uint64_t bits;
  if (tok.size() != 18 || tok.drop_front(2).getAsInteger(16, bits))
    return makeError("expected 16 hex digits of a double's bits, found '" +
                     tok + "'");
  double d;
  std::memcpy(&d, &bits, 8);
  return d;
}

template <typename T>
static void appendBytes(T v, std::vector<uint8_t> &bytes) {
  uint8_t buf[sizeof(T)];
  std::memcpy(buf, &v, sizeof(T));
  bytes.insert(bytes.end(), buf, buf + sizeof(T));
}

template <typename T>
static llvm::Error appendInteger(DType t, llvm::StringRef tok,
                                 std::vector<uint8_t> &bytes) {
  using Wide = std::conditional_t<std::is_signed<T>::value, int64_t, uint64_t>;
  Wide v;
  if (tok.getAsInteger(10, v))
    return makeError("expected an integer element of " + dtypeName(t) +
                     ", found '" + tok + "'");
  if (v < static_cast<Wide>(std::numeric_limits<T>::min()) ||
      v > static_cast<Wide>(std::numeric_limits<T>::max()))
    return makeError("element " + tok + " does not fit in " + dtypeName(t));
  appendBytes(static_cast<T>(v), bytes);
  return llvm::Error::success();
}

llvm::Error appendElement(DType t, llvm::StringRef tok,
                          std::vector<uint8_t> &bytes) {
  switch (t) {
  case DType::Bool:
  case DType::U8:
    return appendInteger<uint8_t>(t, tok, bytes);
  case DType::I8:
    return appendInteger<int8_t>(t, tok, bytes);
  case DType::U16:
    return appendInteger<uint16_t>(t, tok, bytes);
  case DType::I16:
    return appendInteger<int16_t>(t, tok, bytes);
  case DType::U32:
    return appendInteger<uint32_t>(t, tok, bytes);
  case DType::I32:
    return appendInteger<int32_t>(t, tok, bytes);
  case DType::U64:
    return appendInteger<uint64_t>(t, tok, bytes);
  case DType::I64:
    return appendInteger<int64_t>(t, tok, bytes);
  case DType::F64: {
    auto d = parseFloating<double>(tok);
    if (!d)
      return d.takeError();
    appendBytes(*d, bytes);
    return llvm::Error::success();
  }
  case DType::F32:
  case DType::F16:
  case DType::BF16: {
    // Parsed as float, not double: a shortest float decimal converts to the
    // exact float only when read at float precision.
    auto f = parseFloating<float>(tok);
    if (!f)
      return f.takeError();
    if (t == DType::F32)
      appendBytes(*f, bytes);
    else
      appendBytes(t == DType::F16 ? floatToHalf(*f) : floatToBf16(*f), bytes);
    return llvm::Error::success();
  }
  }
  return makeError("unsupported element type");
}

llvm::Expected<std::vector<uint8_t>> parseHexBytes(llvm::StringRef s) {
  if (!isHexBits(s) || s.size() % 2 != 0)
    return makeError("expected \"0x\" and two hex digits per byte");
  std::vector<uint8_t> bytes;
  for (size_t i = 2; i < s.size(); i += 2) {
    if (!llvm::isHexDigit(s[i]) || !llvm::isHexDigit(s[i + 1]))
      return makeError("expected \"0x\" and two hex digits per byte");
    bytes.push_back(llvm::hexDigitValue(s[i]) * 16 +
                    llvm::hexDigitValue(s[i + 1]));
  }
  return bytes;
}

} // namespace zinc::ir::text
