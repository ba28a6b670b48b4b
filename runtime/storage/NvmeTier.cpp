//===- NvmeTier.cpp - The NVMe tier: creation, request checks, handles ----===//
#include "zinc/runtime/storage/NvmeTier.h"
#include "IoEngine.h"
#include "TierFile.h"
#include "zinc/support/Error.h"
#include <unistd.h>

namespace zinc::storage {

using detail::IoState;

llvm::Error IoHandle::wait() const {
  if (!state)
    return llvm::Error::success();
  std::unique_lock<std::mutex> lock(state->mutex);
  state->cv.wait(lock, [&] { return state->done; });
  if (state->error.empty())
    return llvm::Error::success();
  return makeError(state->error);
}

bool IoHandle::isDone() const {
  if (!state)
    return true;
  std::lock_guard<std::mutex> lock(state->mutex);
  return state->done;
}

llvm::Expected<std::unique_ptr<NvmeTier>>
NvmeTier::create(const NvmeTierOptions &options) {
  if (options.capacityBytes == 0)
    return makeError("nvme tier: the capacity must be positive");
  if (options.blockBytes == 0 || !isIoAligned(options.blockBytes))
    return makeError(
        "nvme tier: the block size (" + llvm::Twine(options.blockBytes) +
        " bytes) must be a positive multiple of " + llvm::Twine(kIoAlignment));
  if (options.queueDepth == 0 || options.queueDepth > 65536)
    return makeError("nvme tier: the queue depth (" +
                     llvm::Twine(options.queueDepth) +
                     ") must be between 1 and 65536");

  std::unique_ptr<NvmeTier> tier(new NvmeTier());
  tier->options = options;
  tier->capacityBytes = alignUpToIo(options.capacityBytes);
  auto file = detail::createTierFile(options.dir, tier->capacityBytes,
                                     options.forceBuffered, options.warn);
  if (!file)
    return file.takeError();

  detail::EngineConfig config;
  config.fd = file->fd;
  config.path = file->path;
  config.blockBytes = options.blockBytes;
  config.queueDepth = options.queueDepth;
  config.validate = options.validate;
  config.afterWriteHook = options.afterWriteHook;
  if (file->direct) {
    auto engine = detail::createAioEngine(std::move(config));
    if (!engine) {
      detail::closeTierFile(*file, /*keep=*/false);
      return engine.takeError();
    }
    tier->engine = std::move(*engine);
  } else {
    tier->engine = detail::createBufferedEngine(std::move(config));
  }
  tier->fd = file->fd;
  tier->filePath = file->path;
  tier->direct = file->direct;
  // The name goes now: the descriptor keeps the blocks until it closes, which
  // every exit of the process does, a crash or SIGKILL included, so no tier
  // file is ever left behind to fill the disk.
  if (!options.keepFile && ::unlink(file->path.c_str()) == 0)
    tier->unlinked = true;
  return tier;
}

NvmeTier::~NvmeTier() {
  // The engine drains its queue before its thread stops, so every buffer a
  // caller handed us has been released before the file goes.
  engine.reset();
  detail::TierFile file{fd, filePath, direct};
  detail::closeTierFile(file, options.keepFile || unlinked);
}

llvm::Error NvmeTier::checkRequest(const IoRequest &request) const {
  const char *what = request.kind == IoKind::Read ? "read" : "write";
  auto refuse = [&](const llvm::Twine &why) {
    return makeError("nvme tier: " + filePath + ": " + what + " of " +
                     llvm::Twine(request.bytes) + " bytes at offset " +
                     llvm::Twine(request.tierOffset) + " refused: " + why);
  };
  if (request.bytes == 0)
    return refuse("it is empty");
  if (!request.host)
    return refuse("the host buffer is null");
  if (!isIoAligned(request.tierOffset))
    return refuse("the tier offset is not a multiple of " +
                  llvm::Twine(kIoAlignment));
  if (!isIoAligned(request.host))
    return refuse("the host buffer is not " + llvm::Twine(kIoAlignment) +
                  "-byte aligned (allocate it with AlignedBuffer)");
  uint64_t span = alignUpToIo(request.bytes);
  if (request.tierOffset > capacityBytes ||
      span > capacityBytes - request.tierOffset)
    return refuse("it ends at " + llvm::Twine(request.tierOffset + span) +
                  " (rounded up to whole sectors), past the tier's " +
                  llvm::Twine(capacityBytes) + " bytes");
  return llvm::Error::success();
}

llvm::Expected<IoHandle> NvmeTier::submit(const IoRequest &request) {
  if (llvm::Error err = checkRequest(request))
    return err;
  auto op = std::make_unique<detail::IoOp>();
  op->request = request;
  op->span = alignUpToIo(request.bytes);
  op->segments.push_back({request.host, op->span});
  op->state = std::make_shared<IoState>();
  IoHandle handle(op->state);
  engine->enqueue(std::move(op));
  return handle;
}

llvm::Expected<IoHandle>
NvmeTier::submitGather(IoKind kind, uint64_t tierOffset,
                       llvm::ArrayRef<IoSegment> segments) {
  if (segments.size() == 1)
    return submit({kind, tierOffset, segments[0].host, segments[0].bytes});
  IoRequest request{kind, tierOffset,
                    segments.empty() ? nullptr : segments[0].host, 0};
  for (const IoSegment &seg : segments)
    request.bytes += seg.bytes;
  if (llvm::Error err = checkRequest(request))
    return err;
  auto op = std::make_unique<detail::IoOp>();
  for (size_t i = 0; i < segments.size(); ++i) {
    const IoSegment &seg = segments[i];
    bool last = i + 1 == segments.size();
    if (!seg.host || !isIoAligned(seg.host) || seg.bytes == 0 ||
        (!last && !isIoAligned(seg.bytes)))
      return makeError(
          "nvme tier: " + filePath + ": gathered " +
          (kind == IoKind::Read ? "read" : "write") + " at offset " +
          llvm::Twine(tierOffset) + " refused: segment " + llvm::Twine(i) +
          " of " + llvm::Twine(segments.size()) + " (" +
          llvm::Twine(seg.bytes) + " bytes) must be non-empty, start " +
          llvm::Twine(kIoAlignment) +
          "-byte aligned and, unless last, be whole sectors");
    op->segments.push_back(
        {seg.host, last ? alignUpToIo(seg.bytes) : seg.bytes});
  }
  op->request = request;
  op->span = alignUpToIo(request.bytes);
  op->state = std::make_shared<IoState>();
  IoHandle handle(op->state);
  engine->enqueue(std::move(op));
  return handle;
}

IoStats NvmeTier::stats() const { return engine->stats(); }

llvm::Expected<IoHandle> NvmeTier::read(uint64_t tierOffset, void *dst,
                                        uint64_t bytes) {
  return submit({IoKind::Read, tierOffset, dst, bytes});
}

llvm::Expected<IoHandle> NvmeTier::write(uint64_t tierOffset, const void *src,
                                         uint64_t bytes) {
  // The engine never writes through the pointer of a write request.
  return submit({IoKind::Write, tierOffset, const_cast<void *>(src), bytes});
}

llvm::Error NvmeTier::transfer(const IoRequest &request) {
  auto handle = submit(request);
  if (!handle)
    return handle.takeError();
  return handle->wait();
}

} // namespace zinc::storage
