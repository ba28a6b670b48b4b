//===- AlignedBuffer.h - Host buffers the NVMe tier can transfer ----------===//
//
// O_DIRECT moves bytes between the device and the caller's memory without a
// copy, so the kernel requires the buffer address, the file offset and the
// length to be multiples of the device's logical block size. zinc uses one
// alignment for all three, kIoAlignment (4096: the page size and the largest
// logical block size of common NVMe drives), and this allocator hands out
// buffers that satisfy it.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_STORAGE_ALIGNEDBUFFER_H
#define ZINC_RUNTIME_STORAGE_ALIGNEDBUFFER_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"
#include <cstdint>
#include <memory>

namespace zinc::storage {

/// Alignment of every tier offset, host buffer and transfer length.
constexpr uint64_t kIoAlignment = 4096;

/// `bytes` rounded up to a multiple of kIoAlignment.
constexpr uint64_t alignUpToIo(uint64_t bytes) {
  return (bytes + kIoAlignment - 1) / kIoAlignment * kIoAlignment;
}

/// True if `value` is a multiple of kIoAlignment.
constexpr bool isIoAligned(uint64_t value) { return value % kIoAlignment == 0; }

/// True if `ptr` is kIoAlignment-aligned.
inline bool isIoAligned(const void *ptr) {
  return reinterpret_cast<uintptr_t>(ptr) % kIoAlignment == 0;
}

/// Size of a transparent huge page on x86-64, and the alignment that lets
/// the kernel back a mapping with them.
constexpr uint64_t kHugePageBytes = 2u << 20;

/// Asks the kernel to back [p, p + bytes) with transparent huge pages.
///
/// Why the NVMe tier wants them: O_DIRECT hands the device the buffer's
/// physical pages as a scatter list, one segment per physically contiguous
/// run. With 4 KiB pages a 1 MiB block is up to 256 segments, more than a
/// virtio disk takes in one request (max_segments 254 here), so the block
/// layer splits it and the device sees twice the requests; a 2 MiB page
/// makes the block one segment. Measured on this machine kind
/// (bench/README.md): writes 4.0 -> 7.0 GB/s, reads 1.8 -> 3.0 GB/s.
/// A system with THP off ignores the advice: no error, 4 KiB pages.
void adviseHugePages(void *p, uint64_t bytes);

namespace detail {
/// AlignedBuffer's deleter: unmaps the `mapped` bytes it was given.
struct UnmapBuffer {
  uint64_t mapped = 0;
  void operator()(uint8_t *p) const;
};
} // namespace detail

/// A zero-filled host buffer whose address is kIoAlignment-aligned and whose
/// capacity is `size()` rounded up to kIoAlignment, so that a transfer of
/// `size()` bytes, which the tier rounds up to whole 4096-byte sectors, stays
/// inside it. Buffers of kHugePageBytes or more are mapped on a huge-page
/// boundary and advised to use huge pages (adviseHugePages).
class AlignedBuffer {
public:
  AlignedBuffer() = default;
  /// Fails (naming the size) when the memory cannot be allocated.
  static llvm::Expected<AlignedBuffer> allocate(uint64_t bytes);

  uint8_t *data() { return mem.get(); }
  const uint8_t *data() const { return mem.get(); }
  /// The bytes asked for.
  uint64_t size() const { return bytes; }
  /// The bytes that may be read or written: size() rounded up.
  uint64_t capacity() const { return alignUpToIo(bytes); }
  llvm::MutableArrayRef<uint8_t> bytesRef() { return {data(), bytes}; }
  llvm::ArrayRef<uint8_t> bytesRef() const { return {data(), bytes}; }

private:
  std::unique_ptr<uint8_t, detail::UnmapBuffer> mem;
  uint64_t bytes = 0;
};

} // namespace zinc::storage

#endif
