//===- NvmeStore.h - The NVMe tier as the executor sees it ----------------===//
//
// The executor's view of the NVMe tier: a flat byte range read and written in
// whole 4096-byte sectors from 4096-aligned host buffers (O_DIRECT's rules).
// The implementation is the storage library's NvmeTier (libaio, O_DIRECT);
// the interface keeps the executor independent of it.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_NVMESTORE_H
#define ZINC_RUNTIME_NVMESTORE_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include <cstdint>
#include <functional>
#include <memory>

namespace zinc::rt {

/// Alignment of NVMe offsets, host buffers and transfer spans.
constexpr uint64_t kNvmeAlignment = 4096;

/// `bytes` rounded up to whole NVMe sectors.
constexpr uint64_t alignUpToSector(uint64_t bytes) {
  return (bytes + kNvmeAlignment - 1) / kNvmeAlignment * kNvmeAlignment;
}

/// One host piece of a transfer: kNvmeAlignment-aligned; a whole number of
/// sectors unless it is the transfer's last piece.
struct NvmeSegment {
  void *host = nullptr;
  uint64_t bytes = 0;
};

/// A transfer in flight. wait() returns its outcome once it completed.
class NvmePending {
public:
  virtual ~NvmePending();
  virtual llvm::Error wait() = 0;
};

/// What the tier has moved, per direction: bytes, and seconds during which
/// at least one request of that direction was in the kernel (so bytes /
/// busySeconds is the measured device rate).
struct NvmeIoStats {
  uint64_t readBytes = 0, writeBytes = 0;
  /// Requests the tier served (a merged request counts once).
  uint64_t readRequests = 0, writeRequests = 0;
  double readBusySeconds = 0, writeBusySeconds = 0;
};

class NvmeStore {
public:
  virtual ~NvmeStore();
  /// Starts moving the tier range [offset, offset + sum of the segments'
  /// bytes, rounded up to a sector) into (`write` false) or out of the
  /// segments, in order. The segments must stay valid, and for a write
  /// unchanged, until the returned transfer's wait() returned.
  virtual llvm::Expected<std::unique_ptr<NvmePending>>
  start(bool write, uint64_t offset, llvm::ArrayRef<NvmeSegment> segments) = 0;
  /// Reads [offset, offset + alignUpToSector(bytes)) of the tier into `dst`
  /// and returns when the bytes are there. `offset` and `dst` must be
  /// kNvmeAlignment-aligned and `dst` must hold the whole sectors.
  llvm::Error read(uint64_t offset, void *dst, uint64_t bytes);
  /// Writes the whole sectors from `src` to the tier at `offset` and returns
  /// when they landed.
  llvm::Error write(uint64_t offset, const void *src, uint64_t bytes);
  /// The tier's file, for diagnostics.
  virtual llvm::StringRef path() const = 0;
  /// Measured traffic since the store was created.
  virtual NvmeIoStats ioStats() const = 0;
};

/// How the NVMe tier does its I/O (zinc-run's --nvme-* flags).
struct NvmeIoOptions {
  /// Bytes per request; 0: the storage library's default (1 MiB).
  uint64_t blockBytes = 0;
  /// Requests in flight; 0: the storage library's default (32).
  unsigned queueDepth = 0;
  /// Re-read every write and compare (debugging; slow).
  bool validate = false;
};

/// Creates a zero-filled tier of `bytes` (rounded up to a sector) in a file
/// under `dir`, removed when the store is destroyed. Fails naming the
/// directory when the file cannot be created or the disk lacks the space.
/// `warn` receives one-line
/// warnings (buffered I/O where the filesystem refuses O_DIRECT).
llvm::Expected<std::unique_ptr<NvmeStore>>
createNvmeStore(llvm::StringRef dir, uint64_t bytes,
                std::function<void(llvm::StringRef)> warn = nullptr,
                const NvmeIoOptions &io = {});

} // namespace zinc::rt

#endif
