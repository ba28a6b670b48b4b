//===- NvmeTierTest.cpp - Round trips, refusals and validate of the tier --===//
#include "zinc/runtime/storage/NvmeTier.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "gtest/gtest.h"
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <csignal>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/statvfs.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace zinc::storage;

namespace {

/// A fresh directory for each test, on a disk-backed filesystem where one
/// exists (/var/tmp) so that the O_DIRECT path is the one exercised.
class NvmeTierTest : public ::testing::Test {
protected:
  void SetUp() override {
    llvm::SmallString<128> model(
        llvm::sys::fs::is_directory("/var/tmp") ? "/var/tmp" : "");
    if (model.empty())
      llvm::sys::path::system_temp_directory(true, model);
    llvm::sys::path::append(model, "zinc-nvme-test-%%%%%%");
    llvm::SmallString<128> created;
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory(model, created));
    dir = std::string(created);
  }
  void TearDown() override {
    if (!dir.empty())
      llvm::sys::fs::remove_directories(dir);
  }

  NvmeTierOptions options(uint64_t capacity) {
    NvmeTierOptions o;
    o.dir = dir;
    o.capacityBytes = capacity;
    o.warn = [this](llvm::StringRef msg) { warnings.push_back(msg.str()); };
    return o;
  }

  std::unique_ptr<NvmeTier> create(const NvmeTierOptions &o) {
    auto tier = NvmeTier::create(o);
    if (!tier) {
      ADD_FAILURE() << llvm::toString(tier.takeError());
      return nullptr;
    }
    return std::move(*tier);
  }

  std::string dir;
  std::vector<std::string> warnings;
};

AlignedBuffer makeBuffer(uint64_t bytes, unsigned seed) {
  auto buffer = AlignedBuffer::allocate(bytes);
  EXPECT_TRUE(static_cast<bool>(buffer));
  if (!buffer) {
    llvm::consumeError(buffer.takeError());
    return AlignedBuffer();
  }
  // The whole capacity, tail padding included: a tail write carries it into
  // the tier, which the neighbour checks below must then see is harmless.
  for (uint64_t i = 0; i < buffer->capacity(); ++i)
    buffer->data()[i] = static_cast<uint8_t>((i * 2654435761u >> 13) + seed);
  return std::move(*buffer);
}

std::string errorText(llvm::Error err) {
  return llvm::toString(std::move(err));
}

template <typename T> std::string errorText(llvm::Expected<T> value) {
  if (value)
    return "";
  return llvm::toString(value.takeError());
}

/// Writes then reads back each size at each offset, with a sentinel region
/// right after the request's sectors that must survive untouched.
void roundTrips(NvmeTier &tier) {
  const uint64_t block = tier.blockBytes();
  const std::vector<uint64_t> sizes = {1,
                                       100,
                                       4095,
                                       4096,
                                       4097,
                                       block - 1,
                                       block,
                                       block + 1,
                                       3 * block + 123,
                                       5 * block,
                                       8 * block + 4096 * 3 + 17};
  unsigned seed = 1;
  for (uint64_t bytes : sizes) {
    uint64_t span = alignUpToIo(bytes);
    const uint64_t sentinelBytes = 2 * kIoAlignment;
    std::vector<uint64_t> offsets = {0, kIoAlignment, 7 * kIoAlignment,
                                     tier.capacity() - span - sentinelBytes};
    for (uint64_t offset : offsets) {
      SCOPED_TRACE("bytes " + std::to_string(bytes) + " at offset " +
                   std::to_string(offset));
      AlignedBuffer sentinel = makeBuffer(sentinelBytes, seed + 100);
      ASSERT_EQ(errorText(tier.transfer({IoKind::Write, offset + span,
                                         sentinel.data(), sentinelBytes})),
                "");
      AlignedBuffer src = makeBuffer(bytes, seed++);
      auto written = tier.write(offset, src.data(), bytes);
      ASSERT_TRUE(static_cast<bool>(written)) << errorText(written.takeError());
      ASSERT_EQ(errorText(written->wait()), "");

      AlignedBuffer dst = makeBuffer(bytes, 0);
      std::memset(dst.data(), 0, dst.capacity());
      auto read = tier.read(offset, dst.data(), bytes);
      ASSERT_TRUE(static_cast<bool>(read)) << errorText(read.takeError());
      ASSERT_EQ(errorText(read->wait()), "");
      ASSERT_EQ(std::memcmp(dst.data(), src.data(), bytes), 0);

      AlignedBuffer after = makeBuffer(sentinelBytes, 0);
      ASSERT_EQ(errorText(tier.transfer({IoKind::Read, offset + span,
                                         after.data(), sentinelBytes})),
                "");
      ASSERT_EQ(std::memcmp(after.data(), sentinel.data(), sentinelBytes), 0)
          << "the request wrote past its sectors";
    }
  }
}

/// True if the kernel lets `dir` open files with O_DIRECT.
bool directIoWorks(const std::string &dir) {
  std::string path = dir + "/probe-odirect";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_DIRECT, 0600);
  int err = errno;
  if (fd >= 0)
    ::close(fd);
  ::unlink(path.c_str());
  return fd >= 0 || err != EINVAL;
}

TEST_F(NvmeTierTest, RoundTripsSizesAndOffsetsThroughLibaio) {
  NvmeTierOptions o = options(16 << 20);
  o.blockBytes = 64 << 10;
  o.queueDepth = 8;
  auto tier = create(o);
  ASSERT_TRUE(tier);
  if (!directIoWorks(dir))
    GTEST_SKIP() << dir << " refuses O_DIRECT; the buffered tests cover it";
  EXPECT_TRUE(tier->usesDirectIo());
  EXPECT_TRUE(warnings.empty());
  roundTrips(*tier);
}

/// The names in `dir`, "." and ".." aside.
std::vector<std::string> entries(const std::string &dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec;
       it.increment(ec))
    names.push_back(llvm::sys::path::filename(it->path()).str());
  return names;
}

/// The blocks allocated to the unlinked files this process holds open under
/// `dir`, found through /proc/self/fd. Asked of the file itself, not of the
/// filesystem's free count, which other processes change at the same time
/// (ctest runs test groups in parallel on the same disk).
uint64_t allocatedBytesOfOpenDeletedFilesIn(const std::string &dir) {
  uint64_t bytes = 0;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it("/proc/self/fd", ec), end;
       it != end && !ec; it.increment(ec)) {
    char target[4096];
    ssize_t n = ::readlink(it->path().c_str(), target, sizeof(target) - 1);
    if (n <= 0)
      continue;
    llvm::StringRef link(target, static_cast<size_t>(n));
    if (!link.startswith(dir + "/") || !link.endswith(" (deleted)"))
      continue;
    struct stat st;
    if (::stat(it->path().c_str(), &st) == 0)
      bytes += static_cast<uint64_t>(st.st_blocks) * 512;
  }
  return bytes;
}

TEST_F(NvmeTierTest, FileIsPreallocatedAndNeverLeftBehind) {
  NvmeTierOptions o = options(3 * (1 << 20) + 5);
  auto tier = create(o);
  ASSERT_TRUE(tier);
  EXPECT_EQ(tier->capacity(), alignUpToIo(3 * (1 << 20) + 5));
  // Unlinked at once: the directory is empty while the tier lives...
  EXPECT_EQ(entries(dir), std::vector<std::string>{});
  // ... and the blocks are allocated all the same.
  EXPECT_GE(allocatedBytesOfOpenDeletedFilesIn(dir), tier->capacity())
      << "the tier's blocks are not allocated";
  AlignedBuffer buf = makeBuffer(8192, 5), back = makeBuffer(8192, 0);
  ASSERT_EQ(errorText(tier->transfer({IoKind::Write, 4096, buf.data(), 8192})), "");
  ASSERT_EQ(errorText(tier->transfer({IoKind::Read, 4096, back.data(), 8192})), "");
  EXPECT_EQ(std::memcmp(buf.data(), back.data(), 8192), 0);
  tier.reset();
  EXPECT_EQ(entries(dir), std::vector<std::string>{});
}

// A process killed while its tier is open leaves no file behind.
TEST_F(NvmeTierTest, SigkillLeavesNoTierFile) {
  NvmeTierOptions o = options(4 << 20);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto tier = NvmeTier::create(o);
    if (!tier)
      ::_exit(3);
    AlignedBuffer buf = makeBuffer(1 << 20, 1);
    (void)(*tier)->write(0, buf.data(), 1 << 20); // in flight, never waited
    ::kill(::getpid(), SIGKILL);
    ::_exit(4);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "child exited with " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
  EXPECT_EQ(entries(dir), std::vector<std::string>{});
}

TEST_F(NvmeTierTest, KeepFileLeavesTheFileAndItsBytes) {
  NvmeTierOptions o = options(1 << 20);
  o.keepFile = true;
  auto tier = create(o);
  ASSERT_TRUE(tier);
  std::string path = tier->path().str();
  AlignedBuffer src = makeBuffer(10000, 3);
  ASSERT_EQ(errorText(tier->transfer({IoKind::Write, 8192, src.data(), 10000})),
            "");
  tier.reset();
  auto contents = llvm::MemoryBuffer::getFile(path);
  ASSERT_TRUE(static_cast<bool>(contents));
  ASSERT_EQ((*contents)->getBufferSize(), 1u << 20);
  EXPECT_EQ(
      std::memcmp((*contents)->getBufferStart() + 8192, src.data(), 10000), 0);
  ::unlink(path.c_str());
}

TEST_F(NvmeTierTest, ManyRequestsInFlightFromSeveralThreads) {
  const unsigned threads = 4, perThread = 64;
  const uint64_t bytes = 3 * kIoAlignment + 1000;
  const uint64_t stride = alignUpToIo(bytes);
  NvmeTierOptions o = options(threads * perThread * stride);
  o.blockBytes = kIoAlignment; // four blocks per request
  o.queueDepth = 16;
  auto tier = create(o);
  ASSERT_TRUE(tier);

  std::vector<AlignedBuffer> src, dst;
  for (unsigned i = 0; i < threads * perThread; ++i) {
    src.push_back(makeBuffer(bytes, i));
    dst.push_back(makeBuffer(bytes, 0));
    std::memset(dst.back().data(), 0, dst.back().capacity());
  }
  // Each thread issues all its writes, waits, then all its reads, waits:
  // many requests of different threads queue behind each other.
  std::vector<std::string> failures(threads);
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (IoKind kind : {IoKind::Write, IoKind::Read}) {
        std::vector<IoHandle> handles;
        for (unsigned j = 0; j < perThread; ++j) {
          unsigned i = j * threads + t; // interleave the threads' extents
          void *host = kind == IoKind::Write ? src[i].data() : dst[i].data();
          auto h = tier->submit({kind, i * stride, host, bytes});
          if (!h) {
            failures[t] = llvm::toString(h.takeError());
            return;
          }
          handles.push_back(*h);
        }
        for (const IoHandle &h : handles)
          if (llvm::Error err = h.wait()) {
            failures[t] = llvm::toString(std::move(err));
            return;
          }
        for (const IoHandle &h : handles)
          if (!h.isDone())
            failures[t] = "a waited handle is not done";
      }
    });
  for (std::thread &th : pool)
    th.join();
  for (const std::string &f : failures)
    EXPECT_EQ(f, "");
  for (unsigned i = 0; i < threads * perThread; ++i)
    ASSERT_EQ(std::memcmp(src[i].data(), dst[i].data(), bytes), 0)
        << "request " << i;
}

TEST_F(NvmeTierTest, ForcedBufferedFallbackRoundTrips) {
  NvmeTierOptions o = options(16 << 20);
  o.blockBytes = 64 << 10;
  o.forceBuffered = true;
  o.validate = true;
  auto tier = create(o);
  ASSERT_TRUE(tier);
  EXPECT_FALSE(tier->usesDirectIo());
  EXPECT_TRUE(warnings.empty()) << "forcing buffered I/O is not a surprise";
  roundTrips(*tier);
}

TEST_F(NvmeTierTest, DevShmFallsBackWhereTheKernelRefusesODirect) {
  if (!llvm::sys::fs::is_directory("/dev/shm") || ::access("/dev/shm", W_OK))
    GTEST_SKIP() << "no writable /dev/shm";
  NvmeTierOptions o = options(4 << 20);
  o.dir = "/dev/shm";
  o.blockBytes = 64 << 10;
  auto tier = create(o);
  ASSERT_TRUE(tier);
  // tmpfs accepts O_DIRECT since Linux 6.6; before, open fails with EINVAL
  // and the tier must warn once and go buffered.
  if (directIoWorks("/dev/shm")) {
    EXPECT_TRUE(tier->usesDirectIo());
    EXPECT_TRUE(warnings.empty());
  } else {
    EXPECT_FALSE(tier->usesDirectIo());
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_EQ(warnings[0],
              "nvme tier: O_DIRECT is not supported on /dev/shm (tmpfs?); "
              "using buffered I/O, which is slower and goes through the page "
              "cache");
  }
  roundTrips(*tier);
}

TEST_F(NvmeTierTest, MisalignedRequestsAreRefused) {
  auto tier = create(options(1 << 20));
  ASSERT_TRUE(tier);
  AlignedBuffer buf = makeBuffer(3 * kIoAlignment, 1);
  std::string err = errorText(tier->write(100, buf.data(), 4096));
  EXPECT_NE(err.find("write of 4096 bytes at offset 100 refused: the tier "
                     "offset is not a multiple of 4096"),
            std::string::npos)
      << err;
  err = errorText(tier->read(4096, buf.data() + 8, 4096));
  EXPECT_NE(err.find("read of 4096 bytes at offset 4096 refused: the host "
                     "buffer is not 4096-byte aligned"),
            std::string::npos)
      << err;
  EXPECT_NE(errorText(tier->read(0, buf.data(), 0)).find("it is empty"),
            std::string::npos);
  EXPECT_NE(errorText(tier->read(0, nullptr, 10)).find("null"),
            std::string::npos);
}

TEST_F(NvmeTierTest, OutOfRangeRequestsAreRefused) {
  auto tier = create(options(1 << 20));
  ASSERT_TRUE(tier);
  AlignedBuffer buf = makeBuffer(2 * kIoAlignment, 1);
  uint64_t cap = tier->capacity();
  // The last sector is in range; one byte more rounds up past the end.
  EXPECT_EQ(
      errorText(tier->transfer({IoKind::Write, cap - 4096, buf.data(), 4096})),
      "");
  std::string err = errorText(tier->write(cap - 4096, buf.data(), 4097));
  EXPECT_NE(err.find("past the tier's 1048576 bytes"), std::string::npos)
      << err;
  EXPECT_NE(errorText(tier->read(cap, buf.data(), 1)).find("past the tier"),
            std::string::npos);
  // Offsets near 2^64 must not wrap around into range.
  uint64_t huge = ~uint64_t(0) / kIoAlignment * kIoAlignment;
  EXPECT_NE(errorText(tier->read(huge, buf.data(), 8192)).find("past the tier"),
            std::string::npos);
}

TEST_F(NvmeTierTest, MissingDirectoryAndNotADirectory) {
  NvmeTierOptions o = options(1 << 20);
  o.dir = dir + "/does-not-exist";
  EXPECT_EQ(errorText(NvmeTier::create(o)),
            "nvme tier: directory '" + o.dir + "' does not exist");
  std::string file = dir + "/plain-file";
  int fd = ::open(file.c_str(), O_CREAT | O_WRONLY, 0600);
  ASSERT_GE(fd, 0);
  ::close(fd);
  o.dir = file;
  EXPECT_EQ(errorText(NvmeTier::create(o)),
            "nvme tier: '" + file + "' is not a directory");
}

TEST_F(NvmeTierTest, NotEnoughSpaceNamesTheDirectoryAndTheBytes) {
  struct statvfs vfs;
  ASSERT_EQ(::statvfs(dir.c_str(), &vfs), 0);
  uint64_t available = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  uint64_t want = alignUpToIo(available + (uint64_t(1) << 40));
  NvmeTierOptions o = options(want);
  std::string err = errorText(NvmeTier::create(o));
  EXPECT_NE(err.find("nvme tier: not enough space in '" + dir +
                     "': the tier needs " + std::to_string(want) + " bytes"),
            std::string::npos)
      << err;
  // Nothing is left behind.
  std::error_code ec;
  EXPECT_EQ(llvm::sys::fs::directory_iterator(dir, ec),
            llvm::sys::fs::directory_iterator());
}

TEST_F(NvmeTierTest, BadOptionsAreRefused) {
  NvmeTierOptions o = options(1 << 20);
  o.blockBytes = 1000;
  EXPECT_NE(errorText(NvmeTier::create(o)).find("block size (1000 bytes)"),
            std::string::npos);
  o = options(1 << 20);
  o.queueDepth = 0;
  EXPECT_NE(errorText(NvmeTier::create(o)).find("queue depth (0)"),
            std::string::npos);
  o = options(0);
  EXPECT_NE(errorText(NvmeTier::create(o)).find("capacity"), std::string::npos);
}

/// Validate mode: corrupt one byte of the file through a separate descriptor
/// after the write lands and before the tier re-reads it.
void validateCatchesCorruption(NvmeTier &tier, bool &corrupt,
                               uint64_t corruptAt) {
  AlignedBuffer src = makeBuffer(200000, 9);
  // Clean write: validate passes.
  corrupt = false;
  EXPECT_EQ(
      errorText(tier.transfer({IoKind::Write, 65536, src.data(), 200000})), "");
  corrupt = true;
  std::string err =
      errorText(tier.transfer({IoKind::Write, 65536, src.data(), 200000}));
  EXPECT_NE(err.find(tier.path().str() +
                     ": validate: the tier holds different bytes than were "
                     "written at offset " +
                     std::to_string(corruptAt)),
            std::string::npos)
      << err;
  // The failure is the request's, not the tier's: the next write passes.
  corrupt = false;
  EXPECT_EQ(
      errorText(tier.transfer({IoKind::Write, 65536, src.data(), 200000})), "");
}

TEST_F(NvmeTierTest, ValidateCatchesCorruptionBehindTheTiersBack) {
  for (bool buffered : {false, true}) {
    SCOPED_TRACE(buffered ? "buffered" : "libaio");
    bool corrupt = false;
    // Inside the third 64 KiB block of the write at 65536.
    const uint64_t corruptAt = 65536 + 2 * 65536 + 777;
    std::string path;
    NvmeTierOptions o = options(1 << 20);
    o.forceBuffered = buffered;
    o.validate = true;
    o.blockBytes = 64 << 10;
    o.keepFile = true; // the hook opens the file by name
    o.afterWriteHook = [&](const IoRequest &) {
      if (!corrupt)
        return;
      int fd = ::open(path.c_str(), O_RDWR);
      ASSERT_GE(fd, 0) << path;
      uint8_t byte = 0;
      ASSERT_EQ(::pread(fd, &byte, 1, corruptAt), 1);
      byte ^= 0x5a;
      ASSERT_EQ(::pwrite(fd, &byte, 1, corruptAt), 1);
      ASSERT_EQ(::fsync(fd), 0);
      ::close(fd);
    };
    auto tier = create(o);
    ASSERT_TRUE(tier);
    path = tier->path().str();
    validateCatchesCorruption(*tier, corrupt, corruptAt);
  }
}

TEST_F(NvmeTierTest, ShortReadOfATruncatedFileIsAnError) {
  for (bool buffered : {false, true}) {
    SCOPED_TRACE(buffered ? "buffered" : "libaio");
    NvmeTierOptions o = options(1 << 20);
    o.forceBuffered = buffered;
    o.blockBytes = 64 << 10;
    o.keepFile = true; // truncated by name below
    auto tier = create(o);
    ASSERT_TRUE(tier);
    // Someone truncates the tier file: the end of the tier is gone.
    ASSERT_EQ(::truncate(tier->path().str().c_str(), 512 << 10), 0);
    // Two blocks: the first is inside the file, the second past its end.
    AlignedBuffer buf = makeBuffer(128 << 10, 0);
    auto h = tier->read(448 << 10, buf.data(), 128 << 10);
    ASSERT_TRUE(static_cast<bool>(h));
    std::string err = errorText(h->wait());
    EXPECT_NE(err.find(tier->path().str() + ": "), std::string::npos) << err;
    EXPECT_NE(err.find("at offset 524288"), std::string::npos) << err;
    EXPECT_TRUE(err.find("short transfer of 0") != std::string::npos ||
                err.find("the tier file ends early") != std::string::npos)
        << err;
    // wait() reports the same outcome every time.
    EXPECT_EQ(errorText(h->wait()), err);
  }
}

/// Gathers tensors scattered in host memory into one tier range and
/// scatters them back, with blocks that straddle segments (vectored iocbs).
void gatherRoundTrip(NvmeTier &tier) {
  // Lengths in sectors; the last segment may end mid-sector.
  const std::vector<uint64_t> lengths = {kIoAlignment, 3 * kIoAlignment,
                                         20 * kIoAlignment, kIoAlignment,
                                         5 * kIoAlignment + 100};
  std::vector<AlignedBuffer> srcs, dsts;
  std::vector<IoSegment> out, in;
  uint64_t total = 0;
  unsigned seed = 7;
  for (uint64_t len : lengths) {
    srcs.push_back(makeBuffer(len, seed++));
    dsts.push_back(makeBuffer(len, 0));
    std::memset(dsts.back().data(), 0, dsts.back().capacity());
    out.push_back({srcs.back().data(), len});
    in.push_back({dsts.back().data(), len});
    total += len;
  }
  const uint64_t at = 3 * kIoAlignment;
  auto written = tier.submitGather(IoKind::Write, at, out);
  ASSERT_TRUE(static_cast<bool>(written)) << errorText(written.takeError());
  ASSERT_EQ(errorText(written->wait()), "");
  // The tier holds the segments back to back.
  AlignedBuffer whole = makeBuffer(total, 0);
  ASSERT_EQ(errorText(tier.transfer({IoKind::Read, at, whole.data(), total})),
            "");
  uint64_t pos = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    ASSERT_EQ(std::memcmp(whole.data() + pos, srcs[i].data(), lengths[i]), 0)
        << "segment " << i;
    pos += lengths[i];
  }
  auto read = tier.submitGather(IoKind::Read, at, in);
  ASSERT_TRUE(static_cast<bool>(read)) << errorText(read.takeError());
  ASSERT_EQ(errorText(read->wait()), "");
  for (size_t i = 0; i < lengths.size(); ++i)
    ASSERT_EQ(std::memcmp(dsts[i].data(), srcs[i].data(), lengths[i]), 0)
        << "segment " << i;
}

TEST_F(NvmeTierTest, GatheredRequestsRoundTripAcrossBlocks) {
  NvmeTierOptions o = options(1 << 20);
  o.blockBytes = 16 << 10; // blocks of 4 sectors straddle the segments
  o.queueDepth = 4;
  o.validate = true;
  auto tier = create(o);
  ASSERT_TRUE(tier);
  gatherRoundTrip(*tier);
  o.forceBuffered = true;
  auto buffered = create(o);
  ASSERT_TRUE(buffered);
  gatherRoundTrip(*buffered);
}

TEST_F(NvmeTierTest, GatheredSegmentsMustBeWholeSectorsButTheLast) {
  auto tier = create(options(1 << 20));
  ASSERT_TRUE(tier);
  AlignedBuffer a = makeBuffer(2 * kIoAlignment, 1),
                b = makeBuffer(kIoAlignment, 2);
  std::vector<IoSegment> ragged = {{a.data(), 100}, {b.data(), kIoAlignment}};
  EXPECT_EQ(errorText(tier->submitGather(IoKind::Write, 0, ragged)),
            "nvme tier: " + tier->path().str() +
                ": gathered write at offset 0 refused: segment 0 of 2 (100 "
                "bytes) must be non-empty, start 4096-byte aligned and, "
                "unless last, be whole sectors");
  std::vector<IoSegment> misaligned = {{a.data(), kIoAlignment},
                                       {a.data() + 8, kIoAlignment}};
  EXPECT_NE(errorText(tier->submitGather(IoKind::Read, 0, misaligned)), "");
  std::vector<IoSegment> tooFar = {{a.data(), 2 * kIoAlignment},
                                   {b.data(), kIoAlignment}};
  EXPECT_NE(errorText(tier->submitGather(IoKind::Read,
                                         (1 << 20) - 2 * kIoAlignment, tooFar)),
            "");
}

TEST_F(NvmeTierTest, StatsCountBytesRequestsAndBusyTimePerDirection) {
  NvmeTierOptions o = options(4 << 20);
  o.blockBytes = 64 << 10;
  auto tier = create(o);
  ASSERT_TRUE(tier);
  IoStats before = tier->stats();
  EXPECT_EQ(before.bytes[0] + before.bytes[1], 0u);
  AlignedBuffer buf = makeBuffer(1 << 20, 3);
  ASSERT_EQ(errorText(tier->transfer({IoKind::Write, 0, buf.data(), 1 << 20})),
            "");
  ASSERT_EQ(
      errorText(tier->transfer({IoKind::Write, 1 << 20, buf.data(), 100})), "");
  ASSERT_EQ(errorText(tier->transfer({IoKind::Read, 0, buf.data(), 1 << 20})),
            "");
  IoStats s = tier->stats();
  EXPECT_EQ(s.bytes[1], (1u << 20) + kIoAlignment); // whole sectors
  EXPECT_EQ(s.bytes[0], 1u << 20);
  EXPECT_EQ(s.requests[1], 2u);
  EXPECT_EQ(s.requests[0], 1u);
  EXPECT_GT(s.busySeconds[0], 0.0);
  EXPECT_GT(s.busySeconds[1], 0.0);
}

// The engine issues one direction at a time and may serve a read queued
// after a write first, but never one that depends on it.
TEST_F(NvmeTierTest, DependentRequestsQueuedTogetherKeepTheirOrder) {
  NvmeTierOptions o = options(8 << 20);
  o.blockBytes = 64 << 10;
  o.queueDepth = 4;
  auto tier = create(o);
  ASSERT_TRUE(tier);
  const uint64_t n = 1 << 20, a = 0, b = 2 << 20, c = 4 << 20;
  AlignedBuffer oldB = makeBuffer(n, 1);
  ASSERT_EQ(errorText(tier->transfer({IoKind::Write, b, oldB.data(), n})), "");
  AlignedBuffer toA = makeBuffer(n, 2), toB = makeBuffer(n, 3),
                toC = makeBuffer(n, 4);
  AlignedBuffer fromB = makeBuffer(n, 0), fromA = makeBuffer(n, 0);
  AlignedBuffer shared = makeBuffer(n, 5);
  std::vector<IoHandle> handles;
  auto queue = [&](IoKind kind, uint64_t at, AlignedBuffer &buf) {
    auto h = tier->submit({kind, at, buf.data(), n});
    ASSERT_TRUE(static_cast<bool>(h)) << errorText(h.takeError());
    handles.push_back(*h);
  };
  queue(IoKind::Write, a, toA);  // then read back: the read waits
  queue(IoKind::Read, b, fromB); // then overwritten: the write waits
  queue(IoKind::Write, b, toB);
  queue(IoKind::Read, a, fromA);
  queue(IoKind::Write, c, shared); // then read into the same host bytes
  queue(IoKind::Read, b, shared);
  for (const IoHandle &h : handles)
    ASSERT_EQ(errorText(h.wait()), "");
  EXPECT_EQ(std::memcmp(fromB.data(), oldB.data(), n), 0);
  EXPECT_EQ(std::memcmp(fromA.data(), toA.data(), n), 0);
  EXPECT_EQ(std::memcmp(shared.data(), toB.data(), n), 0);
  AlignedBuffer check = makeBuffer(n, 0);
  ASSERT_EQ(errorText(tier->transfer({IoKind::Read, c, check.data(), n})), "");
  AlignedBuffer expected = makeBuffer(n, 5);
  EXPECT_EQ(std::memcmp(check.data(), expected.data(), n), 0);
}

TEST(IoHandleTest, DefaultHandleIsDone) {
  IoHandle h;
  EXPECT_TRUE(h.isDone());
  EXPECT_FALSE(static_cast<bool>(h.wait()));
}

TEST(AlignedBufferTest, AlignedZeroedAndRoundedUp) {
  auto buf = AlignedBuffer::allocate(5000);
  ASSERT_TRUE(static_cast<bool>(buf));
  EXPECT_TRUE(isIoAligned(buf->data()));
  EXPECT_EQ(buf->size(), 5000u);
  EXPECT_EQ(buf->capacity(), 8192u);
  for (uint64_t i = 0; i < buf->capacity(); ++i)
    ASSERT_EQ(buf->data()[i], 0);
}

TEST(AlignedBufferTest, LargeBuffersStartOnAHugePage) {
  auto buf = AlignedBuffer::allocate(3 * kHugePageBytes + 5);
  ASSERT_TRUE(static_cast<bool>(buf));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(buf->data()) % kHugePageBytes, 0u);
  EXPECT_EQ(buf->capacity(), 3 * kHugePageBytes + kIoAlignment);
  buf->data()[buf->capacity() - 1] = 1; // all of it is mapped
  for (uint64_t i = 0; i + 1 < buf->capacity(); i += 4096)
    ASSERT_EQ(buf->data()[i], 0);
}

} // namespace
