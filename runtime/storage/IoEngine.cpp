//===- IoEngine.cpp - Queue, completion and validate of the I/O thread ----===//
#include "IoEngine.h"
#include <cassert>
#include <cstring>
#include <sys/resource.h>
#include <unistd.h>

namespace zinc::storage::detail {

void raiseIoThreadPriority() {
  // Compute threads keep every core busy during a training step; an I/O
  // thread that waits its turn to reap a completion leaves the device idle
  // between short bursts (measured: a GPT step's NVMe reads at 2.2 GB/s with
  // both cores computing, 2.5 with one). A higher priority lets it run as
  // soon as the kernel wakes it. Lowering the nice value needs
  // CAP_SYS_NICE (or RLIMIT_NICE); without it the thread keeps the default.
  (void)::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()),
                      kIoThreadNice);
}

void IoState::complete(std::string message) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    error = std::move(message);
    done = true;
  }
  cv.notify_all();
}

void IoEngine::enqueue(std::unique_ptr<IoOp> op) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    queue.push_back(std::move(op));
  }
  cv.notify_one();
}

IoStats IoEngine::stats() const {
  std::lock_guard<std::mutex> lock(statsMutex);
  return totals;
}

void IoEngine::blockIssued(IoKind kind) {
  unsigned k = kind == IoKind::Write;
  if (busyBlocks[k]++ == 0)
    busySince[k] = std::chrono::steady_clock::now();
}

void IoEngine::blockDone(IoKind kind, uint64_t bytes) {
  unsigned k = kind == IoKind::Write;
  std::lock_guard<std::mutex> lock(statsMutex);
  totals.bytes[k] += bytes;
  if (--busyBlocks[k] == 0)
    totals.busySeconds[k] +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                      busySince[k])
            .count();
}

void hostPieces(const IoOp &op, uint64_t pos, uint64_t len,
                llvm::SmallVectorImpl<std::pair<uint8_t *, uint64_t>> &out) {
  uint64_t segStart = 0;
  for (const IoSegment &seg : op.segments) {
    uint64_t segEnd = segStart + seg.bytes;
    if (len == 0)
      break;
    if (pos < segEnd) {
      uint64_t take = std::min(len, segEnd - pos);
      out.push_back(
          {static_cast<uint8_t *>(seg.host) + (pos - segStart), take});
      pos += take;
      len -= take;
    }
    segStart = segEnd;
  }
  assert(len == 0 && "a block past the op's segments");
}

void IoEngine::start() {
  thread = std::thread([this] {
    raiseIoThreadPriority();
    run();
  });
}

void IoEngine::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  cv.notify_one();
  if (thread.joinable())
    thread.join();
}

std::unique_ptr<IoOp> IoEngine::takeOp(bool block) {
  std::unique_lock<std::mutex> lock(mutex);
  if (block)
    cv.wait(lock, [&] { return stopping || !queue.empty(); });
  if (queue.empty())
    return nullptr;
  std::unique_ptr<IoOp> op = std::move(queue.front());
  queue.pop_front();
  return op;
}

void IoEngine::finish(std::unique_ptr<IoOp> op) {
  {
    std::lock_guard<std::mutex> lock(statsMutex);
    ++totals.requests[op->request.kind == IoKind::Write];
  }
  if (op->error.empty() && op->request.kind == IoKind::Write) {
    if (config.afterWriteHook)
      config.afterWriteHook(op->request);
    if (config.validate)
      op->error = validateWrite(*op);
  }
  op->state->complete(std::move(op->error));
}

std::string IoEngine::validateWrite(const IoOp &op) {
  if (scratch.size() == 0) {
    auto buffer = AlignedBuffer::allocate(config.blockBytes);
    if (!buffer)
      return config.path + ": validate: " + llvm::toString(buffer.takeError());
    scratch = std::move(*buffer);
  }
  llvm::SmallVector<std::pair<uint8_t *, uint64_t>, 4> pieces;
  for (uint64_t done = 0; done < op.request.bytes;) {
    uint64_t offset = op.request.tierOffset + done;
    // Re-read whole sectors (O_DIRECT), compare only the request's bytes.
    uint64_t span = std::min(config.blockBytes, op.span - done);
    std::string err = syncTransfer(config.fd, config.path, IoKind::Read, offset,
                                   scratch.data(), span);
    if (!err.empty())
      return "validate: " + err;
    uint64_t compare = std::min(span, op.request.bytes - done);
    pieces.clear();
    hostPieces(op, done, compare, pieces);
    const uint8_t *read = scratch.data();
    for (auto [host, len] : pieces) {
      if (std::memcmp(read, host, len) != 0) {
        uint64_t at = 0;
        while (read[at] == host[at])
          ++at;
        return (config.path +
                ": validate: the tier holds different bytes than " +
                "were written at offset " +
                llvm::Twine(offset + (read - scratch.data()) + at) +
                " (write of " + llvm::Twine(op.request.bytes) +
                " bytes at offset " + llvm::Twine(op.request.tierOffset) + ")")
            .str();
      }
      read += len;
    }
    done += span;
  }
  return "";
}

} // namespace zinc::storage::detail
