//===- NvmeStore.cpp - The NVMe tier over the storage library -------------===//
#include "zinc/runtime/NvmeStore.h"
#include "zinc/runtime/storage/NvmeTier.h"
#include "zinc/support/Error.h"

namespace zinc::rt {

NvmeStore::~NvmeStore() = default;

namespace {

class TierStore : public NvmeStore {
public:
  explicit TierStore(std::unique_ptr<storage::NvmeTier> tier)
      : tier(std::move(tier)) {}

  llvm::Error read(uint64_t offset, void *dst, uint64_t bytes) override {
    return tier->transfer({storage::IoKind::Read, offset, dst, bytes});
  }
  llvm::Error write(uint64_t offset, const void *src, uint64_t bytes) override {
    return tier->transfer(
        {storage::IoKind::Write, offset, const_cast<void *>(src), bytes});
  }
  llvm::StringRef path() const override { return tier->path(); }

private:
  std::unique_ptr<storage::NvmeTier> tier;
};

} // namespace

static_assert(kNvmeAlignment == storage::kIoAlignment,
              "the executor and the storage library disagree on alignment");

llvm::Expected<std::unique_ptr<NvmeStore>>
createNvmeStore(llvm::StringRef dir, uint64_t bytes,
                std::function<void(llvm::StringRef)> warn, const NvmeIoOptions &io) {
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
