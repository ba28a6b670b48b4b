//===- IoEngine.cpp - Queue, completion and validate of the I/O thread ----===//
#include "IoEngine.h"
#include <cstring>

namespace zinc::storage::detail {

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

void IoEngine::start() {
  thread = std::thread([this] { run(); });
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
  const auto *host = static_cast<const uint8_t *>(op.request.host);
  for (uint64_t done = 0; done < op.request.bytes;) {
    uint64_t offset = op.request.tierOffset + done;
    // Re-read whole sectors (O_DIRECT), compare only the request's bytes.
    uint64_t span = std::min(config.blockBytes, op.span - done);
    std::string err = syncTransfer(config.fd, config.path, IoKind::Read, offset,
                                   scratch.data(), span);
    if (!err.empty())
      return "validate: " + err;
    uint64_t compare = std::min(span, op.request.bytes - done);
    if (std::memcmp(scratch.data(), host + done, compare) != 0) {
      uint64_t at = 0;
      while (scratch.data()[at] == host[done + at])
        ++at;
      return (config.path + ": validate: the tier holds different bytes than " +
              "were written at offset " + llvm::Twine(offset + at) +
              " (write of " + llvm::Twine(op.request.bytes) +
              " bytes at offset " + llvm::Twine(op.request.tierOffset) + ")")
          .str();
    }
    done += span;
  }
  return "";
}

} // namespace zinc::storage::detail
