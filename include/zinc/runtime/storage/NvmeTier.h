//===- NvmeTier.h - The NVMe tier: one preallocated file, async I/O -------===//
//
// The planner gives every tensor whose home is NVMe an extent (offset, bytes)
// in one flat tier; at run time the nvme stream moves extents between the
// tier and pinned host staging buffers. This is that tier: a file under
// `zinc-run --nvme-dir=DIR`, preallocated at start-up so that a full disk is
// found before the first step, and read and written through libaio with
// O_DIRECT, split into blocks of a fixed size with a fixed number of blocks in
// flight (DeepSpeed's aio model: block size and queue depth are explicit).
//
// Alignment contract (O_DIRECT's): a request's tier offset and host address
// must be multiples of kIoAlignment (4096). Its length may be anything; the
// transfer is rounded up to whole 4096-byte sectors, so a request owns the tier
// range [offset, offset + alignUpToIo(bytes)) and the host range of the same
// length. A write of 1000 bytes therefore also writes the 3096 bytes after
// them in the buffer into the tier, and a read of 1000 bytes fills the 3096
// bytes after them in the buffer. AlignedBuffer provides such buffers;
// misaligned or out-of-range requests are refused with an error, never
// clipped.
//
// Where the filesystem refuses O_DIRECT (open or the first transfer fails with
// EINVAL: older tmpfs, some overlay filesystems) the tier falls back to
// buffered pread/pwrite on its I/O thread and says so once through the
// warning callback.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_STORAGE_NVMETIER_H
#define ZINC_RUNTIME_STORAGE_NVMETIER_H

#include "zinc/runtime/storage/AlignedBuffer.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace zinc::storage {

namespace detail {
struct IoState;
class IoEngine;
} // namespace detail

enum class IoKind { Read, Write };

/// One transfer between the tier and host memory: a small descriptor, as in
/// DeepSpeed's aio. `host` must stay valid (and, for writes, unchanged) until
/// the request's handle reports completion.
struct IoRequest {
  IoKind kind = IoKind::Read;
  uint64_t tierOffset = 0;
  void *host = nullptr;
  uint64_t bytes = 0;
};

/// One piece of host memory of a gathered request (NvmeTier::submitGather):
/// kIoAlignment-aligned, and a whole number of sectors long unless it is the
/// request's last piece.
struct IoSegment {
  void *host = nullptr;
  uint64_t bytes = 0;
};

/// What the tier has moved since it was created, per direction (index
/// 0: reads, 1: writes). Measured on the I/O thread: `busySeconds` is the
/// time during which at least one block of that direction was in the kernel,
/// so bytes / busySeconds is the device's rate for that direction whatever
/// the caller did between requests.
struct IoStats {
  uint64_t bytes[2] = {0, 0};
  uint64_t requests[2] = {0, 0};
  double busySeconds[2] = {0, 0};
};

/// Completion of one submitted request. Copies share the same request, so a
/// stream thread can issue several transfers, keep their handles, and wait
/// later while compute runs.
class IoHandle {
public:
  IoHandle() = default;
  /// Blocks until the request completed; its error if it failed (every call
  /// returns the same outcome). A default-constructed handle is complete.
  llvm::Error wait() const;
  /// True once the request completed (successfully or not); never blocks.
  bool isDone() const;

private:
  friend class NvmeTier;
  explicit IoHandle(std::shared_ptr<detail::IoState> state)
      : state(std::move(state)) {}
  std::shared_ptr<detail::IoState> state;
};

/// How to create the tier.
struct NvmeTierOptions {
  /// Existing directory that receives the tier file.
  std::string dir;
  /// Tier size; rounded up to kIoAlignment and preallocated.
  uint64_t capacityBytes = 0;
  /// Largest single I/O handed to the kernel; a multiple of kIoAlignment.
  uint64_t blockBytes = 1 << 20;
  /// Blocks in flight at once (io_setup's nr_events).
  unsigned queueDepth = 32;
  /// Use buffered pread/pwrite even where O_DIRECT works (tests, debugging).
  bool forceBuffered = false;
  /// Re-read every write after it lands and compare it with the host bytes;
  /// a difference fails the write's handle.
  bool validate = false;
  /// Keep the tier file's name, and leave the file in place when the tier is
  /// destroyed. Otherwise the file is unlinked as soon as it is created (the
  /// open descriptor keeps its blocks), so no exit path leaves it behind.
  bool keepFile = false;
  /// Receives one-line warnings (the O_DIRECT fallback); dropped if empty.
  std::function<void(llvm::StringRef)> warn;
  /// Called on the I/O thread after a write landed and before validate
  /// re-reads it: lets a test corrupt the file behind the tier's back.
  std::function<void(const IoRequest &)> afterWriteHook;
};

/// The NVMe tier. Submissions are thread-safe; completions are delivered by
/// one I/O thread that owns the libaio context.
class NvmeTier {
public:
  /// Creates and preallocates `<dir>/zinc-nvme-<pid>-<n>.tier`, then (unless
  /// keepFile) unlinks it. Fails if the directory does not exist, lacks space
  /// for the tier (naming both), or an open/fallocate/io_setup call fails.
  static llvm::Expected<std::unique_ptr<NvmeTier>>
  create(const NvmeTierOptions &options);
  /// Waits for every submitted request, then closes the file, which frees
  /// its blocks unless `keepFile` was set.
  ~NvmeTier();
  NvmeTier(const NvmeTier &) = delete;
  NvmeTier &operator=(const NvmeTier &) = delete;

  /// Queues `request`; refuses misaligned, empty or out-of-range requests.
  llvm::Expected<IoHandle> submit(const IoRequest &request);
  /// Queues one request for the contiguous tier range starting at
  /// `tierOffset` whose host side is `segments`, in order: adjacent tensors
  /// in the tier move as one run of full blocks (vectored I/O) wherever
  /// their host buffers are. The segments must stay valid until completion.
  llvm::Expected<IoHandle> submitGather(IoKind kind, uint64_t tierOffset,
                                        llvm::ArrayRef<IoSegment> segments);
  llvm::Expected<IoHandle> read(uint64_t tierOffset, void *dst, uint64_t bytes);
  llvm::Expected<IoHandle> write(uint64_t tierOffset, const void *src,
                                 uint64_t bytes);
  /// submit() then wait().
  llvm::Error transfer(const IoRequest &request);

  /// The tier file's name (in diagnostics; unlinked unless keepFile).
  llvm::StringRef path() const { return filePath; }
  uint64_t capacity() const { return capacityBytes; }
  uint64_t blockBytes() const { return options.blockBytes; }
  unsigned queueDepth() const { return options.queueDepth; }
  /// False when the tier fell back to (or was forced into) buffered I/O.
  bool usesDirectIo() const { return direct; }
  /// Bytes, requests and busy time so far, per direction. Thread-safe.
  IoStats stats() const;

private:
  NvmeTier() = default;
  llvm::Error checkRequest(const IoRequest &request) const;

  NvmeTierOptions options;
  std::string filePath;
  uint64_t capacityBytes = 0;
  int fd = -1;
  bool direct = false;
  bool unlinked = false;
  std::unique_ptr<detail::IoEngine> engine;
};

} // namespace zinc::storage

#endif
