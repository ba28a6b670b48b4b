//===- nvme_io.cpp - zinc-bench-nvme: sequential throughput of the tier ---===//
//
// Writes then reads `--size` bytes sequentially through an NvmeTier with the
// given block size and queue depth and prints GB/s (1e9 bytes/s) as JSON.
// bench/nvme_io.py runs it beside fio with the same parameters.
//
//===----------------------------------------------------------------------===//
#include "zinc/runtime/storage/NvmeTier.h"
#include "zinc/support/Error.h"
#include "zinc/support/Size.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"
#include <chrono>
#include <cstring>
#include <fstream>
#include <vector>

using namespace zinc;
using namespace zinc::storage;
namespace cl = llvm::cl;

static cl::opt<std::string> dir("dir", cl::desc("Directory of the tier file"),
                                cl::init("/var/tmp"));
static cl::opt<std::string>
    sizeText("size", cl::desc("Bytes to write then read"), cl::init("1GiB"));
static cl::opt<std::string> blockText("block-size",
                                      cl::desc("Block size (default 1MiB)"),
                                      cl::init("1MiB"));
static cl::opt<unsigned> queueDepth("queue-depth",
                                    cl::desc("Blocks in flight (default 32)"),
                                    cl::init(32));
static cl::opt<std::string>
    chunkText("chunk",
              cl::desc("Bytes per request; requests are all queued at once "
                       "and reuse one host buffer (default 64MiB)"),
              cl::init("64MiB"));
static cl::opt<bool> dropCaches(
    "drop-caches",
    cl::desc("Write 3 to /proc/sys/vm/drop_caches between write and read"));
static cl::opt<bool>
    forceBuffered("buffered", cl::desc("Force buffered I/O (no O_DIRECT)"));
static cl::opt<std::string> jsonPath("json",
                                     cl::desc("Also write the JSON here"));

/// Seconds to push `total` bytes through `tier` as back-to-back requests of
/// `chunk` bytes from one buffer, all in flight before the first wait.
static llvm::Expected<double> runPhase(NvmeTier &tier, IoKind kind,
                                       AlignedBuffer &buffer, uint64_t total) {
  uint64_t chunk = buffer.size();
  std::vector<IoHandle> handles;
  handles.reserve(total / chunk + 1);
  auto start = std::chrono::steady_clock::now();
  for (uint64_t offset = 0; offset < total; offset += chunk) {
    auto handle = tier.submit(
        {kind, offset, buffer.data(), std::min(chunk, total - offset)});
    if (!handle)
      return handle.takeError();
    handles.push_back(*handle);
  }
  for (const IoHandle &handle : handles)
    if (llvm::Error err = handle.wait())
      return err;
  auto end = std::chrono::steady_clock::now();
  return std::chrono::duration<double>(end - start).count();
}

static bool tryDropCaches() {
  std::ofstream out("/proc/sys/vm/drop_caches");
  if (!out)
    return false;
  out << "3\n";
  out.flush();
  return static_cast<bool>(out);
}

static llvm::Error runBench() {
  auto size = parseSize(sizeText);
  if (!size)
    return addContext(size.takeError(), "--size");
  auto block = parseSize(blockText);
  if (!block)
    return addContext(block.takeError(), "--block-size");
  auto chunkBytes = parseSize(chunkText);
  if (!chunkBytes)
    return addContext(chunkBytes.takeError(), "--chunk");
  uint64_t total = alignUpToIo(*size);
  uint64_t chunk = alignUpToIo(std::min(*chunkBytes, total));
  if (total == 0 || chunk == 0)
    return makeError("--size and --chunk must be positive");

  std::vector<std::string> warnings;
  NvmeTierOptions options;
  options.dir = dir;
  options.capacityBytes = total;
  options.blockBytes = *block;
  options.queueDepth = queueDepth;
  options.forceBuffered = forceBuffered;
  options.warn = [&](llvm::StringRef msg) {
    printWarning("zinc-bench-nvme", msg);
    warnings.push_back(msg.str());
  };
  auto tier = NvmeTier::create(options);
  if (!tier)
    return tier.takeError();

  auto buffer = AlignedBuffer::allocate(chunk);
  if (!buffer)
    return buffer.takeError();
  for (uint64_t i = 0; i < chunk; ++i)
    buffer->data()[i] = static_cast<uint8_t>(i * 131 + (i >> 12));
  std::vector<uint8_t> expected(buffer->data(), buffer->data() + chunk);

  auto writeSeconds = runPhase(**tier, IoKind::Write, *buffer, total);
  if (!writeSeconds)
    return writeSeconds.takeError();
  bool dropped = dropCaches && tryDropCaches();
  // Every chunk was written from the same bytes, so whichever chunk lands
  // last, the buffer must hold them again after the read.
  std::memset(buffer->data(), 0, chunk);
  auto readSeconds = runPhase(**tier, IoKind::Read, *buffer, total);
  if (!readSeconds)
    return readSeconds.takeError();
  if (std::memcmp(buffer->data(), expected.data(), chunk) != 0)
    return makeError((*tier)->path() +
                     ": the bytes read back differ from those written");

  llvm::json::Object result{
      {"dir", dir},
      {"file", (*tier)->path()},
      {"bytes", static_cast<int64_t>(total)},
      {"block_bytes", static_cast<int64_t>(*block)},
      {"queue_depth", static_cast<int64_t>(queueDepth)},
      {"request_bytes", static_cast<int64_t>(chunk)},
      {"direct", (*tier)->usesDirectIo()},
      {"caches_dropped", dropped},
      {"write_seconds", *writeSeconds},
      {"read_seconds", *readSeconds},
      {"write_gbps", total / *writeSeconds / 1e9},
      {"read_gbps", total / *readSeconds / 1e9},
      {"warnings", llvm::json::Array(warnings)},
  };
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(result))) << "\n";
  os.flush();
  llvm::outs() << text;
  if (!jsonPath.empty()) {
    std::error_code ec;
    llvm::raw_fd_ostream out(jsonPath, ec, llvm::sys::fs::OF_Text);
    if (ec)
      return makeError(jsonPath + ": " + ec.message());
    out << text;
  }
  return llvm::Error::success();
}

int main(int argc, char **argv) {
  cl::ParseCommandLineOptions(
      argc, argv, "zinc-bench-nvme: sequential write/read GB/s of the tier\n");
  if (llvm::Error err = runBench()) {
    printError("zinc-bench-nvme", std::move(err));
    return 1;
  }
  return 0;
}
