//===- TokenData.h - Training windows read from a flat file of token ids --===//
//
// zinc-run --data=FILE --data-format=tokens-u16|tokens-u32
// --data-inputs=INPUT,TARGET [--data-order=random|sequential]: nanoGPT's
// train.bin. Each row of a batch is a window of the INPUT graph input's
// sequence length T at an offset o: INPUT gets tokens [o, o+T), TARGET
// tokens [o+1, o+T+1). The file is read with pread, one window per row, so
// resident memory does not grow with it; the next step's windows are read
// on a thread of their own while the current step computes.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_TOKENDATA_H
#define ZINC_RUNTIME_TOKENDATA_H

#include "zinc/runtime/Program.h"
#include "llvm/Support/Error.h"
#include <future>
#include <memory>
#include <string>
#include <vector>

namespace zinc::rt {

/// What the --data-* flags ask for.
struct TokenDataOptions {
  std::string path;
  /// "tokens-u16" or "tokens-u32".
  std::string format;
  /// "INPUT,TARGET": the graph inputs fed.
  std::string inputs;
  /// "random" (default) or "sequential".
  std::string order;
  uint64_t seed = 0;
};

/// One step's windows: the INPUT and TARGET rows of this rank, as the
/// graph inputs' element type.
struct TokenBatch {
  uint64_t step = 0;
  std::vector<uint8_t> input, target;
};

class TokenFeeder {
public:
  ~TokenFeeder();
  /// Opens the file and checks it and the flags against the plan: both
  /// inputs integer [B, T] graph inputs of one shape, the plan's only
  /// inputs, the file a whole number of tokens holding a window and its
  /// target. The embedding range is the row count of the table the INPUT
  /// indexes (a Gather of it), when there is one.
  static llvm::Expected<std::unique_ptr<TokenFeeder>>
  open(Program &program, const TokenDataOptions &opts);
  /// Writes step `step`'s windows into the graph inputs, and starts reading
  /// the next step's. A token outside the embedding's range is refused with
  /// the step, the row (of the global batch) and the position in the file.
  llvm::Error feed(Program &program, uint64_t step);

  /// The file offset (in tokens) of global row `row` (rows of the global
  /// batch, step after step): sequential (row*T) mod (len-T-1), or random,
  /// uniform in [0, len-T) from the seed and the row alone.
  uint64_t windowOffset(uint64_t row) const;

private:
  TokenFeeder() = default;
  llvm::Expected<TokenBatch> read(uint64_t step) const;

  std::string path;
  int fd = -1;
  unsigned width = 2;
  uint64_t tokens = 0;
  bool sequential = false;
  uint64_t seed = 0;
  uint32_t inputId = 0, targetId = 0;
  DType dtype = DType::I64;
  int64_t rows = 0, length = 0;
  unsigned rank = 0, ranks = 1;
  /// 0: no range check (no embedding found).
  uint64_t vocabulary = 0;
  std::future<llvm::Expected<TokenBatch>> ahead;
  uint64_t aheadStep = 0;
  bool hasAhead = false;
};

} // namespace zinc::rt

#endif
