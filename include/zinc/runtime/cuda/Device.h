//===- Device.h - Device discovery, the GPU arena, pinned memory, streams -===//
//
// The resources the executor drives on a GPU, each an RAII owner of one CUDA
// object. All of them are made at start-up: the plan fixes every tensor's
// offset in the one arena, so nothing here allocates while a step runs.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_CUDA_DEVICE_H
#define ZINC_RUNTIME_CUDA_DEVICE_H

#include "llvm/Support/Error.h"
#include <cstdint>
#include <cuda_runtime_api.h>

namespace zinc::cuda {

/// The number of CUDA devices this process can use: 0, not an error, when
/// the machine has no driver or no device (CI, a laptop); an error only when
/// a driver is there and fails.
llvm::Expected<int> cudaDeviceCount();

/// The plan's GPU tier: one cudaMalloc on the current device at start-up,
/// after which memory is only ever named by offset. `place` hands out
/// offsets for what start-up lays out (the plan's tier, GEMM workspaces);
/// there is no free, so nothing fragments.
class DeviceArena {
public:
  /// What cudaMalloc guarantees, and what every placement is aligned to
  /// unless asked for more: enough for any vectorised load and for cuBLASLt.
  static constexpr uint64_t kAlignment = 256;

  /// Reserves `bytes` (> 0) of device memory on the current device.
  static llvm::Expected<DeviceArena> create(uint64_t bytes);

  DeviceArena() = default;
  DeviceArena(DeviceArena &&other) noexcept;
  DeviceArena &operator=(DeviceArena &&other) noexcept;
  DeviceArena(const DeviceArena &) = delete;
  DeviceArena &operator=(const DeviceArena &) = delete;
  ~DeviceArena();

  /// Places the next `bytes` at an offset aligned to `align` (a power of
  /// two); an error that says how much is left when they do not fit.
  llvm::Expected<uint64_t> place(uint64_t bytes, uint64_t align = kAlignment);
  /// The device address of [offset, offset + bytes); an error when that
  /// range is not inside the arena, so a corrupt plan cannot scribble.
  llvm::Expected<void *> pointer(uint64_t offset, uint64_t bytes) const;

  void *base() const { return basePtr; }
  uint64_t size() const { return capacity; }
  /// Bytes handed out by `place` so far.
  uint64_t used() const { return top; }

  /// Frees the memory now and reports cudaFree's error; the destructor
  /// frees it too but has nowhere to report to.
  llvm::Error release();

private:
  void *basePtr = nullptr;
  uint64_t capacity = 0;
  uint64_t top = 0;
};

/// Page-locked host memory (cudaHostAlloc), the staging buffers that let
/// host <-> device copies run asynchronously at full PCIe/NVLink speed.
class PinnedBuffer {
public:
  static llvm::Expected<PinnedBuffer> create(uint64_t bytes);

  PinnedBuffer() = default;
  PinnedBuffer(PinnedBuffer &&other) noexcept;
  PinnedBuffer &operator=(PinnedBuffer &&other) noexcept;
  PinnedBuffer(const PinnedBuffer &) = delete;
  PinnedBuffer &operator=(const PinnedBuffer &) = delete;
  ~PinnedBuffer();

  void *data() const { return ptr; }
  uint64_t size() const { return bytes; }
  /// Frees the memory now and reports cudaFreeHost's error.
  llvm::Error release();

private:
  void *ptr = nullptr;
  uint64_t bytes = 0;
};

class Event;

/// A non-blocking stream: it does not synchronise with the legacy default
/// stream, so the plan's compute, copy and collective streams overlap.
class Stream {
public:
  static llvm::Expected<Stream> create();

  Stream() = default;
  Stream(Stream &&other) noexcept;
  Stream &operator=(Stream &&other) noexcept;
  Stream(const Stream &) = delete;
  Stream &operator=(const Stream &) = delete;
  ~Stream();

  cudaStream_t get() const { return stream; }
  /// Makes later work on this stream wait until `event` has completed.
  llvm::Error wait(const Event &event) const;
  /// Blocks the calling thread until everything queued so far is done.
  llvm::Error synchronize() const;

private:
  cudaStream_t stream = nullptr;
};

/// An event without timing, the cheapest kind: only ordering between
/// streams and completion checks, which is all the executor needs.
class Event {
public:
  static llvm::Expected<Event> create();

  Event() = default;
  Event(Event &&other) noexcept;
  Event &operator=(Event &&other) noexcept;
  Event(const Event &) = delete;
  Event &operator=(const Event &) = delete;
  ~Event();

  cudaEvent_t get() const { return event; }
  /// Captures the work queued on `stream` so far.
  llvm::Error record(const Stream &stream);
  /// Whether the captured work has completed, without blocking.
  llvm::Expected<bool> isDone() const;
  /// Blocks the calling thread until the captured work has completed.
  llvm::Error synchronize() const;

private:
  cudaEvent_t event = nullptr;
};

} // namespace zinc::cuda

#endif
