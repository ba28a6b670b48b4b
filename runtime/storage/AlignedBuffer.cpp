//===- AlignedBuffer.cpp - Host buffers aligned for O_DIRECT --------------===//
#include "zinc/runtime/storage/AlignedBuffer.h"
#include "zinc/support/Error.h"
#include <cerrno>
#include <cstring>
#include <sys/mman.h>

namespace zinc::storage {

void adviseHugePages(void *p, uint64_t bytes) {
#ifdef MADV_HUGEPAGE
  (void)::madvise(p, bytes, MADV_HUGEPAGE);
#else
  (void)p;
  (void)bytes;
#endif
}

void detail::UnmapBuffer::operator()(uint8_t *p) const { ::munmap(p, mapped); }

llvm::Expected<AlignedBuffer> AlignedBuffer::allocate(uint64_t bytes) {
  AlignedBuffer buffer;
  buffer.bytes = bytes;
  if (bytes == 0)
    return buffer;
  // Anonymous pages are page-aligned and read as zero, so the padding of a
  // tail sector never carries stale heap contents into the tier file.
  uint64_t capacity = buffer.capacity();
  bool huge = capacity >= kHugePageBytes;
  uint64_t mapped = huge ? capacity + kHugePageBytes : capacity;
  void *p = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return makeError("cannot map " + llvm::Twine(capacity) +
                     " bytes for an I/O buffer: " + std::strerror(errno));
  auto *base = static_cast<uint8_t *>(p);
  if (huge) {
    // Keep the huge-page-aligned part and give back the slop on each side.
    uintptr_t at = reinterpret_cast<uintptr_t>(base);
    uint64_t lead = (kHugePageBytes - at % kHugePageBytes) % kHugePageBytes;
    if (lead)
      ::munmap(base, lead);
    if (kHugePageBytes - lead)
      ::munmap(base + lead + capacity, kHugePageBytes - lead);
    base += lead;
    mapped = capacity;
    adviseHugePages(base, capacity);
  }
  buffer.mem = std::unique_ptr<uint8_t, detail::UnmapBuffer>(
      base, detail::UnmapBuffer{mapped});
  return buffer;
}

} // namespace zinc::storage
