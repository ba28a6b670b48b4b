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
#include <cstdlib>
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

/// A zero-filled host buffer whose address is kIoAlignment-aligned and whose
/// capacity is `size()` rounded up to kIoAlignment, so that a transfer of
/// `size()` bytes, which the tier rounds up to whole 4096-byte sectors, stays
/// inside it.
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
  struct Free {
    void operator()(uint8_t *p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, Free> mem;
  uint64_t bytes = 0;
};

} // namespace zinc::storage

#endif
