//===- hw-json.cpp - Fuzzes the --hw hardware description reader ----------===//
//
// The bytes are a --hw FILE.json as zinc-compile reads one (a file people
// share): any text must end in a description or an error, never a crash,
// whatever its nesting.
//
//===----------------------------------------------------------------------===//
#include "zinc/support/Hardware.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  auto hw = zinc::parseHardwareJson(text, "hw.json");
  if (!hw)
    llvm::consumeError(hw.takeError());
  return 0;
}
