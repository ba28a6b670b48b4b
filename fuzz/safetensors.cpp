//===- safetensors.cpp - Fuzzes the safetensors reader --------------------===//
//
// The bytes are a safetensors file as zinc-run --data and --resume read one:
// the header length, the JSON header (dtypes, shapes, offsets) and the data
// it describes. Every tensor the reader accepts must lie inside the file
// and hold exactly its shape's bytes.
//
//===----------------------------------------------------------------------===//
#include "FuzzInputFile.h"
#include "zinc/runtime/Safetensors.h"
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string &path = zinc::fuzz::writeInputFile("data.safetensors", data, size);
  auto file = zinc::rt::SafetensorsFile::open(path);
  if (!file) {
    llvm::consumeError(file.takeError());
    return 0;
  }
  for (const auto &entry : file->tensors()) {
    const zinc::rt::SafetensorView &t = entry.getValue();
    llvm::Optional<uint64_t> bytes = zinc::tensorBytes(t.shape, zinc::dtypeSize(t.dtype));
    if (!bytes || t.data.size() != *bytes)
      std::abort(); // accepted a tensor whose bytes are not its shape's
    // Touch the bytes: ASan reports any that lie outside the mapping.
    volatile uint8_t sum = 0;
    for (uint8_t b : t.data)
      sum += b;
    (void)sum;
  }
  return 0;
}
