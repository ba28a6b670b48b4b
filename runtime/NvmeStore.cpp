//===- NvmeStore.cpp - The NVMe tier over the storage library -------------===//
#include "zinc/runtime/NvmeStore.h"
#include "zinc/runtime/storage/NvmeTier.h"
#include "zinc/support/Error.h"
#include "llvm/ADT/SmallVector.h"

namespace zinc::rt {

NvmeStore::~NvmeStore() = default;
NvmePending::~NvmePending() = default;

llvm::Error NvmeStore::read(uint64_t offset, void *dst, uint64_t bytes) {
  NvmeSegment segment{dst, bytes};
  auto pending = start(/*write=*/false, offset, segment);
  if (!pending)
    return pending.takeError();
  return (*pending)->wait();
}

llvm::Error NvmeStore::write(uint64_t offset, const void *src, uint64_t bytes) {
  NvmeSegment segment{const_cast<void *>(src), bytes};
  auto pending = start(/*write=*/true, offset, segment);
  if (!pending)
    return pending.takeError();
  return (*pending)->wait();
}

namespace {

class TierPending : public NvmePending {
public:
  explicit TierPending(storage::IoHandle handle) : handle(std::move(handle)) {}
  llvm::Error wait() override { return handle.wait(); }

private:
  storage::IoHandle handle;
};

class TierStore : public NvmeStore {
public:
  explicit TierStore(std::unique_ptr<storage::NvmeTier> tier)
      : tier(std::move(tier)) {}

  llvm::Expected<std::unique_ptr<NvmePending>>
  start(bool write, uint64_t offset,
        llvm::ArrayRef<NvmeSegment> segments) override {
    llvm::SmallVector<storage::IoSegment, 4> pieces;
    for (const NvmeSegment &s : segments)
      pieces.push_back({s.host, s.bytes});
    auto handle = tier->submitGather(
        write ? storage::IoKind::Write : storage::IoKind::Read, offset, pieces);
    if (!handle)
      return handle.takeError();
    return std::make_unique<TierPending>(std::move(*handle));
  }
  llvm::StringRef path() const override { return tier->path(); }
  NvmeIoStats ioStats() const override {
    storage::IoStats s = tier->stats();
    NvmeIoStats out;
    out.readBytes = s.bytes[0];
    out.writeBytes = s.bytes[1];
    out.readRequests = s.requests[0];
    out.writeRequests = s.requests[1];
    out.readBusySeconds = s.busySeconds[0];
    out.writeBusySeconds = s.busySeconds[1];
    return out;
  }

private:
  std::unique_ptr<storage::NvmeTier> tier;
};

} // namespace

static_assert(kNvmeAlignment == storage::kIoAlignment,
              "the executor and the storage library disagree on alignment");

llvm::Expected<std::unique_ptr<NvmeStore>>
createNvmeStore(llvm::StringRef dir, uint64_t bytes,
                std::function<void(llvm::StringRef)> warn,
                const NvmeIoOptions &io) {
  storage::NvmeTierOptions options;
  if (io.blockBytes)
    options.blockBytes = io.blockBytes;
  if (io.queueDepth)
    options.queueDepth = io.queueDepth;
  options.validate = io.validate;
  options.dir = dir.str();
  options.capacityBytes = alignUpToSector(std::max<uint64_t>(bytes, 1));
  options.warn = std::move(warn);
  auto tier = storage::NvmeTier::create(options);
  if (!tier)
    return tier.takeError();
  return std::make_unique<TierStore>(std::move(*tier));
}

} // namespace zinc::rt
