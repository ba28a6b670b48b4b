//===- nvme_io.cpp - zinc-bench-nvme: sequential throughput of the tier ---===//
//
// Writes then reads `--size` bytes sequentially through an NvmeTier with the
// given block size and queue depth, `--loops` times after `--warmup` untimed
// loops, and prints the median GB/s (1e9 bytes/s) of each direction as JSON.
// The host side is one buffer of `--size` bytes, as DeepSpeed's aio benchmark
// has, cut into requests of `--chunk` bytes that are all queued before the
// first wait. bench/nvme_io.py runs it beside DeepSpeed's aio and fio with the
// same parameters.
//
// The host buffer is an AlignedBuffer, so it is backed by huge pages
// (AlignedBuffer.h says why that doubles the throughput); --small-pages
// measures it without them. The warm-up loop matters on ext4: the tier file is
// fallocate'd, so its extents start "unwritten" and the first write of each one
// converts it in the journal, at about half the speed of an overwrite.
// first_write_gbps reports that first pass on its own.
//
//===----------------------------------------------------------------------===//
#include "zinc/runtime/storage/NvmeTier.h"
#include "zinc/support/Error.h"
#include "zinc/support/Size.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"
#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sys/mman.h>
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
              cl::desc("Bytes per request; a loop queues all of its requests "
                       "before the first wait (default: the whole --size)"),
              cl::init("0"));
static cl::opt<bool> oneAtATime(
    "one-at-a-time",
    cl::desc("Wait for each request before submitting the next (what "
             "requests of --chunk bytes get alone)"));
static cl::opt<unsigned> warmupLoops(
    "warmup",
    cl::desc("Untimed write+read loops first; the first write fills the "
             "preallocated file, later ones overwrite it (default 1)"),
    cl::init(1));
static cl::opt<unsigned>
    timedLoops("loops", cl::desc("Timed write+read loops (default 5)"),
               cl::init(5));
static cl::opt<bool> lockBuffer(
    "lock", cl::desc("mlock the host buffer (DeepSpeed page-locks its own)"));
static cl::opt<bool> smallPages(
    "small-pages",
    cl::desc("Advise the host buffer against huge pages (shows what they "
             "gain: bench/README.md)"));
static cl::opt<std::string> mixedChunkText(
    "mixed-chunk",
    cl::desc("Also time loops that read the buffer's first half and write its "
             "second half in alternating requests of this size, all queued at "
             "once (how the directions share the device; default: none)"),
    cl::init("0"));
static cl::opt<bool> dropCaches(
    "drop-caches",
    cl::desc("Write 3 to /proc/sys/vm/drop_caches between write and read"));
static cl::opt<bool>
    forceBuffered("buffered", cl::desc("Force buffered I/O (no O_DIRECT)"));
static cl::opt<std::string> jsonPath("json",
                                     cl::desc("Also write the JSON here"));

/// Seconds to move the whole buffer through `tier` (tier offset = buffer
/// offset) as requests of `chunk` bytes, all queued before the first wait.
static llvm::Expected<double> runPhase(NvmeTier &tier, IoKind kind,
                                       uint8_t *host, uint64_t total,
                                       uint64_t chunk) {
  std::vector<IoHandle> handles;
  handles.reserve(total / chunk + 1);
  auto start = std::chrono::steady_clock::now();
  for (uint64_t offset = 0; offset < total; offset += chunk) {
    auto handle = tier.submit(
        {kind, offset, host + offset, std::min(chunk, total - offset)});
    if (!handle)
      return handle.takeError();
    if (oneAtATime)
      if (llvm::Error err = handle->wait())
        return err;
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

/// The byte at `i` of the pattern every loop writes.
static uint8_t patternByte(uint64_t i) {
  return static_cast<uint8_t>(i * 131 + (i >> 12));
}

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static llvm::json::Array toArray(const std::vector<double> &v) {
  llvm::json::Array a;
  for (double x : v)
    a.push_back(x);
  return a;
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
  if (total == 0)
    return makeError("--size must be positive");
  uint64_t chunk =
      *chunkBytes == 0 ? total : alignUpToIo(std::min(*chunkBytes, total));
  if (timedLoops == 0)
    return makeError("--loops must be at least 1");

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

  auto buffer = AlignedBuffer::allocate(total);
  if (!buffer)
    return buffer.takeError();
  uint8_t *host = buffer->data();
  if (smallPages)
    ::madvise(host, total, MADV_NOHUGEPAGE);
  bool locked = lockBuffer && ::mlock(host, total) == 0;
  if (lockBuffer && !locked)
    printWarning("zinc-bench-nvme",
                 "mlock failed (RLIMIT_MEMLOCK?); the buffer is not locked");
  auto fill = [&] {
    for (uint64_t i = 0; i < total; ++i)
      host[i] = patternByte(i);
  };
  fill();

  std::vector<double> writeTimes, readTimes;
  double firstWriteSeconds = 0;
  bool dropped = false;
  for (unsigned loop = 0; loop < warmupLoops + timedLoops; ++loop) {
    auto writeSeconds = runPhase(**tier, IoKind::Write, host, total, chunk);
    if (!writeSeconds)
      return writeSeconds.takeError();
    if (loop == 0)
      firstWriteSeconds = *writeSeconds;
    dropped = dropCaches && tryDropCaches();
    std::memset(host, 0, total);
    auto readSeconds = runPhase(**tier, IoKind::Read, host, total, chunk);
    if (!readSeconds)
      return readSeconds.takeError();
    for (uint64_t i = 0; i < total; ++i)
      if (host[i] != patternByte(i))
        return makeError((*tier)->path() + ": byte " + llvm::Twine(i) +
                         " read back differs from the one written");
    if (loop >= warmupLoops) {
      writeTimes.push_back(*writeSeconds);
      readTimes.push_back(*readSeconds);
    }
  }
  double writeSeconds = median(writeTimes), readSeconds = median(readTimes);

  auto mixedChunk = parseSize(mixedChunkText);
  if (!mixedChunk)
    return addContext(mixedChunk.takeError(), "--mixed-chunk");
  llvm::json::Object mixed;
  if (*mixedChunk) {
    uint64_t piece = alignUpToIo(*mixedChunk), half = total / 2 / piece * piece;
    std::vector<double> times, readRates, writeRates;
    for (unsigned loop = 0; loop < timedLoops; ++loop) {
      IoStats before = (*tier)->stats();
      std::vector<IoHandle> handles;
      auto start = std::chrono::steady_clock::now();
      for (uint64_t at = 0; at < half; at += piece) {
        for (IoKind kind : {IoKind::Read, IoKind::Write}) {
          uint64_t offset = kind == IoKind::Read ? at : half + at;
          auto h = (*tier)->submit({kind, offset, host + offset, piece});
          if (!h)
            return h.takeError();
          handles.push_back(*h);
        }
      }
      for (const IoHandle &h : handles)
        if (llvm::Error err = h.wait())
          return err;
      times.push_back(std::chrono::duration<double>(
                          std::chrono::steady_clock::now() - start)
                          .count());
      IoStats after = (*tier)->stats();
      readRates.push_back((after.bytes[0] - before.bytes[0]) /
                          (after.busySeconds[0] - before.busySeconds[0]) / 1e9);
      writeRates.push_back((after.bytes[1] - before.bytes[1]) /
                           (after.busySeconds[1] - before.busySeconds[1]) /
                           1e9);
    }
    mixed =
        llvm::json::Object{{"request_bytes", static_cast<int64_t>(piece)},
                           {"combined_gbps", 2 * half / median(times) / 1e9},
                           {"read_busy_gbps", median(readRates)},
                           {"write_busy_gbps", median(writeRates)}};
  }

  llvm::json::Object result{
      {"dir", dir},
      {"file", (*tier)->path()},
      {"bytes", static_cast<int64_t>(total)},
      {"block_bytes", static_cast<int64_t>(*block)},
      {"queue_depth", static_cast<int64_t>(queueDepth)},
      {"request_bytes", static_cast<int64_t>(chunk)},
      {"direct", (*tier)->usesDirectIo()},
      {"buffer_locked", locked},
      {"buffer_huge_pages", !smallPages},
      {"caches_dropped", dropped},
      {"warmup_loops", static_cast<int64_t>(warmupLoops)},
      {"timed_loops", static_cast<int64_t>(timedLoops)},
      {"write_seconds", writeSeconds},
      {"read_seconds", readSeconds},
      {"write_loop_seconds", toArray(writeTimes)},
      {"read_loop_seconds", toArray(readTimes)},
      {"write_gbps", total / writeSeconds / 1e9},
      {"read_gbps", total / readSeconds / 1e9},
      {"first_write_gbps", total / firstWriteSeconds / 1e9},
      {"warnings", llvm::json::Array(warnings)},
      {"mixed", std::move(mixed)},
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
