//===- safetensors.cpp - Fuzzes the safetensors reader --------------------===//
//
// The bytes are a safetensors file as zinc-run --data and --resume read one:
// the header length, the JSON header (dtypes, shapes, offsets) and the data
// it describes. Every tensor the reader accepts must lie inside the file
// and hold exactly its shape's bytes. Reading the header alone (--data=DIR's
// shards at start-up) and reading the file into memory (a shard when its
// steps come) must accept exactly what mapping it accepts, with the same
// tensors.
//
//===----------------------------------------------------------------------===//
#include "zinc/runtime/Safetensors.h"
#include "FuzzInputFile.h"
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string &path =
      zinc::fuzz::writeInputFile("data.safetensors", data, size);
  auto file = zinc::rt::SafetensorsFile::open(path);
  auto header = zinc::rt::SafetensorsFile::openHeader(path);
  auto read = zinc::rt::SafetensorsFile::open(path, /*readIntoMemory=*/true);
  if (bool(file) != bool(header) || bool(file) != bool(read))
    std::abort(); // the three readers disagree on the file
  if (!file) {
    llvm::consumeError(file.takeError());
    llvm::consumeError(header.takeError());
    llvm::consumeError(read.takeError());
    return 0;
  }
  if (header->tensors().size() != file->tensors().size() ||
      read->tensors().size() != file->tensors().size())
    std::abort();
  for (const auto &entry : file->tensors()) {
    const zinc::rt::SafetensorView *h = header->find(entry.getKey());
    const zinc::rt::SafetensorView *r = read->find(entry.getKey());
    if (!h || !r || h->dtype != entry.getValue().dtype ||
        h->shape != entry.getValue().shape || !h->data.empty() ||
        r->data != entry.getValue().data)
      std::abort(); // another tensor, or a header view that holds bytes
  }
  for (const auto &entry : file->tensors()) {
    const zinc::rt::SafetensorView &t = entry.getValue();
    llvm::Optional<uint64_t> bytes =
        zinc::tensorBytes(t.shape, zinc::dtypeSize(t.dtype));
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
