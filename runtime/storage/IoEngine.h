//===- IoEngine.h - The I/O thread behind NvmeTier (internal) -------------===//
//
// An engine owns one thread that takes queued requests in order, splits them
// into blocks and completes their handles. AioEngine keeps up to queue depth
// blocks in flight through libaio; BufferedEngine runs pread/pwrite where the
// filesystem refuses O_DIRECT. Both share the queue, the completion path and
// the validate step defined here.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_STORAGE_IOENGINE_H
#define ZINC_RUNTIME_STORAGE_IOENGINE_H

#include "zinc/runtime/storage/AlignedBuffer.h"
#include "zinc/runtime/storage/NvmeTier.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/Twine.h"
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace zinc::storage::detail {

/// Completion state shared by a request's handles and the engine.
struct IoState {
  mutable std::mutex mutex;
  mutable std::condition_variable cv;
  bool done = false;
  /// Empty on success.
  std::string error;

  void complete(std::string message);
};

/// A queued request and the engine's progress through it.
struct IoOp {
  IoRequest request;
  /// The host side, in tier order; one segment {request.host, span} unless
  /// the request was gathered. Their lengths add up to `span`.
  llvm::SmallVector<IoSegment, 1> segments;
  /// request.bytes rounded up to whole sectors: what is transferred.
  uint64_t span = 0;
  /// Bytes handed to the kernel so far (the next block starts here).
  uint64_t issued = 0;
  /// Blocks handed to the kernel and not yet completed.
  unsigned outstanding = 0;
  /// First failure; later blocks of a failed request are not issued.
  std::string error;
  /// Still has blocks to issue (AioEngine's pending list holds it).
  bool inPending = false;
  std::shared_ptr<IoState> state;
};

/// What an engine needs to know about the tier file.
struct EngineConfig {
  int fd = -1;
  std::string path;
  uint64_t blockBytes = 0;
  unsigned queueDepth = 0;
  bool validate = false;
  std::function<void(const IoRequest &)> afterWriteHook;
};

/// The host pieces of op bytes [pos, pos + len), appended to `out` as
/// (address, length) pairs.
void hostPieces(const IoOp &op, uint64_t pos, uint64_t len,
                llvm::SmallVectorImpl<std::pair<uint8_t *, uint64_t>> &out);

/// The nice value I/O threads ask for (see raiseIoThreadPriority).
constexpr int kIoThreadNice = -10;

/// Gives the calling thread kIoThreadNice where the process may; no error
/// where it may not.
void raiseIoThreadPriority();

/// "<path>: <read|write> at offset <off> (<n> bytes): <call>: <strerror>".
std::string ioErrorMessage(llvm::StringRef path, IoKind kind, uint64_t offset,
                           uint64_t bytes, llvm::StringRef call, int errnum);

/// Transfers exactly `bytes` with pread/pwrite, retrying EINTR and short
/// transfers; "" on success, else a message from ioErrorMessage.
std::string syncTransfer(int fd, llvm::StringRef path, IoKind kind,
                         uint64_t offset, uint8_t *host, uint64_t bytes);

class IoEngine {
public:
  explicit IoEngine(EngineConfig config) : config(std::move(config)) {}
  /// Subclasses call stop() in their destructor, before their members go.
  virtual ~IoEngine() = default;

  /// Queues `op` for the I/O thread. Thread-safe.
  void enqueue(std::unique_ptr<IoOp> op);
  /// What the engine has moved so far. Thread-safe.
  IoStats stats() const;

protected:
  /// Starts the I/O thread running run().
  void start();
  /// Lets the thread drain the queue and finish, then joins it.
  void stop();
  virtual void run() = 0;

  /// The next queued op; blocks while the queue is empty unless `block` is
  /// false. Null when not blocking and nothing is queued, or when stopping
  /// with an empty queue.
  std::unique_ptr<IoOp> takeOp(bool block);
  /// Runs the after-write hook and the validate re-read of a completed write,
  /// then completes the op's handle.
  void finish(std::unique_ptr<IoOp> op);
  /// Busy-time accounting, on the I/O thread: a block of `kind` entered the
  /// kernel, or one left it having moved `bytes`.
  void blockIssued(IoKind kind);
  void blockDone(IoKind kind, uint64_t bytes);

  EngineConfig config;

private:
  std::string validateWrite(const IoOp &op);

  /// Blocks of each direction in the kernel now, and since when one was.
  unsigned busyBlocks[2] = {0, 0};
  std::chrono::steady_clock::time_point busySince[2];
  mutable std::mutex statsMutex;
  IoStats totals;

  std::mutex mutex;
  std::condition_variable cv;
  std::deque<std::unique_ptr<IoOp>> queue;
  bool stopping = false;
  std::thread thread;
  /// The validate re-read lands here (O_DIRECT needs an aligned buffer).
  AlignedBuffer scratch;
};

/// libaio with the file's O_DIRECT descriptor; fails if io_setup does.
llvm::Expected<std::unique_ptr<IoEngine>> createAioEngine(EngineConfig config);
/// pread/pwrite on the I/O thread.
std::unique_ptr<IoEngine> createBufferedEngine(EngineConfig config);

} // namespace zinc::storage::detail

#endif
