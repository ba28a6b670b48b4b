//===- BufferedEngine.cpp - pread/pwrite where O_DIRECT is refused --------===//
//
// Buffered I/O goes through the page cache, which already overlaps and merges
// requests, so one thread issuing block-sized pread/pwrite calls in order is
// enough; libaio would block in io_submit on a buffered descriptor anyway.
//
//===----------------------------------------------------------------------===//
#include "IoEngine.h"

namespace zinc::storage::detail {

namespace {

class BufferedEngine : public IoEngine {
public:
  explicit BufferedEngine(EngineConfig config) : IoEngine(std::move(config)) {
    start();
  }
  ~BufferedEngine() override { stop(); }

private:
  void run() override {
    llvm::SmallVector<std::pair<uint8_t *, uint64_t>, 4> pieces;
    while (std::unique_ptr<IoOp> op = takeOp(/*block=*/true)) {
      IoKind kind = op->request.kind;
      while (op->issued < op->span && op->error.empty()) {
        uint64_t len = std::min(config.blockBytes, op->span - op->issued);
        pieces.clear();
        hostPieces(*op, op->issued, len, pieces);
        uint64_t at = op->request.tierOffset + op->issued;
        blockIssued(kind);
        for (auto [host, bytes] : pieces) {
          op->error =
              syncTransfer(config.fd, config.path, kind, at, host, bytes);
          if (!op->error.empty())
            break;
          at += bytes;
        }
        blockDone(kind, op->error.empty() ? len : 0);
        op->issued += len;
      }
      finish(std::move(op));
    }
  }
};

} // namespace

std::unique_ptr<IoEngine> createBufferedEngine(EngineConfig config) {
  return std::make_unique<BufferedEngine>(std::move(config));
}

} // namespace zinc::storage::detail
