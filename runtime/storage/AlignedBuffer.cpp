//===- AlignedBuffer.cpp - Host buffers aligned for O_DIRECT --------------===//
#include "zinc/runtime/storage/AlignedBuffer.h"
#include "zinc/support/Error.h"
#include <cstring>

namespace zinc::storage {

llvm::Expected<AlignedBuffer> AlignedBuffer::allocate(uint64_t bytes) {
  AlignedBuffer buffer;
  buffer.bytes = bytes;
  if (bytes == 0)
    return buffer;
  void *mem = nullptr;
  int err = posix_memalign(&mem, kIoAlignment, buffer.capacity());
  if (err != 0)
    return makeError("posix_memalign of " + llvm::Twine(buffer.capacity()) +
                     " bytes aligned to " + llvm::Twine(kIoAlignment) + ": " +
                     std::strerror(err));
  // Zeroed so that the padding of a tail sector never carries stale heap
  // contents into the tier file.
  std::memset(mem, 0, buffer.capacity());
  buffer.mem.reset(static_cast<uint8_t *>(mem));
  return buffer;
}

} // namespace zinc::storage
