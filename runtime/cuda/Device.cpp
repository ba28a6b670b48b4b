//===- Device.cpp - Device discovery, the GPU arena, pinned memory, streams
//===//
#include "zinc/runtime/cuda/Device.h"
#include "zinc/runtime/cuda/CudaCheck.h"
#include "zinc/support/Error.h"
#include "llvm/ADT/Twine.h"
#include <utility>

namespace zinc::cuda {

llvm::Expected<int> cudaDeviceCount() {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  // No device, and no (or a too old) driver, which the runtime reports as
  // an insufficient driver, both mean "run on the cpu backend".
  if (status == cudaErrorNoDevice || status == cudaErrorInsufficientDriver) {
    (void)cudaGetLastError();
    return 0;
  }
  if (llvm::Error err = checkCuda(status, "cudaGetDeviceCount"))
    return err;
  return count;
}

//===----------------------------------------------------------------------===//
// DeviceArena
//===----------------------------------------------------------------------===//

llvm::Expected<DeviceArena> DeviceArena::create(uint64_t bytes) {
  if (bytes == 0)
    return makeError("device arena: size must be positive");
  DeviceArena arena;
  if (llvm::Error err =
          checkCuda(cudaMalloc(&arena.basePtr, bytes),
                    "cudaMalloc(" + llvm::Twine(bytes) + " bytes)"))
    return err;
  arena.capacity = bytes;
  return arena;
}

DeviceArena::DeviceArena(DeviceArena &&other) noexcept
    : basePtr(std::exchange(other.basePtr, nullptr)),
      capacity(std::exchange(other.capacity, 0)),
      top(std::exchange(other.top, 0)) {}

DeviceArena &DeviceArena::operator=(DeviceArena &&other) noexcept {
  if (this != &other) {
    llvm::consumeError(release());
    basePtr = std::exchange(other.basePtr, nullptr);
    capacity = std::exchange(other.capacity, 0);
    top = std::exchange(other.top, 0);
  }
  return *this;
}

DeviceArena::~DeviceArena() { llvm::consumeError(release()); }

llvm::Expected<uint64_t> DeviceArena::place(uint64_t bytes, uint64_t align) {
  if (align == 0 || (align & (align - 1)) != 0)
    return makeError("device arena: alignment " + llvm::Twine(align) +
                     " is not a power of two");
  uint64_t offset = (top + align - 1) & ~(align - 1);
  if (offset < top || offset > capacity || bytes > capacity - offset)
    return makeError("device arena: " + llvm::Twine(bytes) +
                     " bytes do not fit, " + llvm::Twine(capacity - top) +
                     " of " + llvm::Twine(capacity) + " bytes are left");
  top = offset + bytes;
  return offset;
}

llvm::Expected<void *> DeviceArena::pointer(uint64_t offset,
                                            uint64_t bytes) const {
  if (offset > capacity || bytes > capacity - offset)
    return makeError("device arena: range [" + llvm::Twine(offset) + ", " +
                     llvm::Twine(offset) + " + " + llvm::Twine(bytes) +
                     ") is outside the arena of " + llvm::Twine(capacity) +
                     " bytes");
  return static_cast<char *>(basePtr) + offset;
}

llvm::Error DeviceArena::release() {
  if (!basePtr)
    return llvm::Error::success();
  void *p = std::exchange(basePtr, nullptr);
  uint64_t bytes = std::exchange(capacity, 0);
  top = 0;
  return checkCuda(cudaFree(p), "cudaFree(device arena of " +
                                    llvm::Twine(bytes) + " bytes)");
}

//===----------------------------------------------------------------------===//
// PinnedBuffer
//===----------------------------------------------------------------------===//

llvm::Expected<PinnedBuffer> PinnedBuffer::create(uint64_t bytes) {
  if (bytes == 0)
    return makeError("pinned buffer: size must be positive");
  PinnedBuffer buf;
  if (llvm::Error err =
          checkCuda(cudaHostAlloc(&buf.ptr, bytes, cudaHostAllocDefault),
                    "cudaHostAlloc(" + llvm::Twine(bytes) + " bytes)"))
    return err;
  buf.bytes = bytes;
  return buf;
}

PinnedBuffer::PinnedBuffer(PinnedBuffer &&other) noexcept
    : ptr(std::exchange(other.ptr, nullptr)),
      bytes(std::exchange(other.bytes, 0)) {}

PinnedBuffer &PinnedBuffer::operator=(PinnedBuffer &&other) noexcept {
  if (this != &other) {
    llvm::consumeError(release());
    ptr = std::exchange(other.ptr, nullptr);
    bytes = std::exchange(other.bytes, 0);
  }
  return *this;
}

PinnedBuffer::~PinnedBuffer() { llvm::consumeError(release()); }

llvm::Error PinnedBuffer::release() {
  if (!ptr)
    return llvm::Error::success();
  void *p = std::exchange(ptr, nullptr);
  uint64_t n = std::exchange(bytes, 0);
  return checkCuda(cudaFreeHost(p),
                   "cudaFreeHost(" + llvm::Twine(n) + " bytes)");
}

//===----------------------------------------------------------------------===//
// Stream and Event
//===----------------------------------------------------------------------===//

llvm::Expected<Stream> Stream::create() {
  Stream s;
  if (llvm::Error err =
          checkCuda(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking),
                    "cudaStreamCreateWithFlags(non-blocking)"))
    return err;
  return s;
}

Stream::Stream(Stream &&other) noexcept
    : stream(std::exchange(other.stream, nullptr)) {}

Stream &Stream::operator=(Stream &&other) noexcept {
  if (this != &other) {
    if (stream)
      (void)cudaStreamDestroy(stream);
    stream = std::exchange(other.stream, nullptr);
  }
  return *this;
}

// Destroying a stream with work still queued is allowed: CUDA releases it
// once the work completes. An error here has nowhere to go.
Stream::~Stream() {
  if (stream)
    (void)cudaStreamDestroy(stream);
}

llvm::Error Stream::wait(const Event &event) const {
  return checkCuda(cudaStreamWaitEvent(stream, event.get(), 0),
                   "cudaStreamWaitEvent");
}

llvm::Error Stream::synchronize() const {
  return checkCuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
}

llvm::Expected<Event> Event::create() {
  Event e;
  if (llvm::Error err =
          checkCuda(cudaEventCreateWithFlags(&e.event, cudaEventDisableTiming),
                    "cudaEventCreateWithFlags(disable-timing)"))
    return err;
  return e;
}

Event::Event(Event &&other) noexcept
    : event(std::exchange(other.event, nullptr)) {}

Event &Event::operator=(Event &&other) noexcept {
  if (this != &other) {
    if (event)
      (void)cudaEventDestroy(event);
    event = std::exchange(other.event, nullptr);
  }
  return *this;
}

Event::~Event() {
  if (event)
    (void)cudaEventDestroy(event);
}

llvm::Error Event::record(const Stream &stream) {
  return checkCuda(cudaEventRecord(event, stream.get()), "cudaEventRecord");
}

llvm::Expected<bool> Event::isDone() const {
  cudaError_t status = cudaEventQuery(event);
  if (status == cudaErrorNotReady)
    return false;
  if (llvm::Error err = checkCuda(status, "cudaEventQuery"))
    return err;
  return true;
}

llvm::Error Event::synchronize() const {
  return checkCuda(cudaEventSynchronize(event), "cudaEventSynchronize");
}

} // namespace zinc::cuda
