//===- TokenData.cpp - Training windows read from a flat file of token ids ===//
#include "zinc/runtime/TokenData.h"
#include "zinc/support/Error.h"
#include "llvm/ADT/Optional.h"
#include "llvm/ADT/StringExtras.h"
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace zinc::rt {

TokenFeeder::~TokenFeeder() {
  if (hasAhead)
    llvm::consumeError(ahead.get().takeError());
  if (fd >= 0)
    ::close(fd);
}

llvm::Expected<std::unique_ptr<TokenFeeder>>
TokenFeeder::open(Program &program, const TokenDataOptions &opts) {
  std::unique_ptr<TokenFeeder> f(new TokenFeeder());
  f->path = opts.path;
  if (opts.format == "tokens-u16")
    f->width = 2;
  else if (opts.format == "tokens-u32")
    f->width = 4;
  else
    return makeError("--data-format must be tokens-u16 or tokens-u32, not '" +
                     opts.format + "'");
  if (opts.order.empty() || opts.order == "random")
    f->sequential = false;
  else if (opts.order == "sequential")
    f->sequential = true;
  else
    return makeError("--data-order must be random or sequential, not '" +
                     opts.order + "'");
  f->seed = opts.seed;
  auto [inputName, targetName] = llvm::StringRef(opts.inputs).split(',');
  if (opts.inputs.empty() || inputName.empty() || targetName.empty() ||
      targetName.contains(','))
    return makeError(
        "--data-format=" + opts.format +
        " needs --data-inputs=INPUT,TARGET (the graph inputs that get a "
        "window and the window one token on), not '" +
        opts.inputs + "'");
  const plan::Plan &plan = program.getPlan();
  bool foundInput = false, foundTarget = false;
  for (uint32_t id : plan.inputs()) {
    llvm::StringRef name = plan.tensors(id).name();
    if (name == inputName) {
      f->inputId = id;
      foundInput = true;
    } else if (name == targetName) {
      f->targetId = id;
      foundTarget = true;
    } else {
      return makeError(
          "--data-inputs=" + opts.inputs + ": the plan's graph input '" + name +
          "' would get no data (a token file feeds only INPUT and TARGET)");
    }
  }
  for (auto [found, name] :
       {std::pair<bool, llvm::StringRef>{foundInput, inputName},
        {foundTarget, targetName}})
    if (!found)
      return makeError("--data-inputs=" + opts.inputs + ": '" + name +
                       "' is not a graph input of the plan");
  const cpu::TensorRef &in = program.tensor(f->inputId),
                       &tgt = program.tensor(f->targetId);
  auto describe = [](const cpu::TensorRef &t) {
    return dtypeName(t.dtype).str() + formatShape(t.shape);
  };
  if (in.shape.size() != 2 || !isIntegerDType(in.dtype) ||
      (in.dtype != DType::I64 && in.dtype != DType::I32) ||
      tgt.dtype != in.dtype ||
      llvm::ArrayRef<int64_t>(tgt.shape) != llvm::ArrayRef<int64_t>(in.shape))
    return makeError("--data-inputs=" + opts.inputs + ": '" + inputName +
                     "' is " + describe(in) + " and '" + targetName + "' " +
                     describe(tgt) +
                     "; token windows need both i64[B,T] or both i32[B,T]");
  f->dtype = in.dtype;
  f->rows = in.shape[0];
  f->length = in.shape[1];
  f->rank = program.rank();
  f->ranks = program.ranks();
  // The table INPUT indexes bounds its ids.
  for (const plan::Instruction &inst : plan.instructions())
    if ((inst.op() == "Gather" || inst.op() == "GatherColumns" ||
         inst.op() == "GatherColumnsInto") &&
        inst.inputs_size() > 1 &&
        inst.inputs(1) == static_cast<int32_t>(f->inputId) &&
        inst.inputs(0) >= 0) {
      const plan::Tensor &table = plan.tensors(inst.inputs(0));
      int64_t rowsOfTable = table.shard_of_size() ? table.shard_of(0)
                            : table.shape_size()  ? table.shape(0)
                                                  : 0;
      if (rowsOfTable > 0 &&
          (f->vocabulary == 0 ||
           static_cast<uint64_t>(rowsOfTable) < f->vocabulary))
        f->vocabulary = rowsOfTable;
    }

  f->fd = ::open(opts.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f->fd < 0)
    return makeError(opts.path + ": cannot open: " + std::strerror(errno));
  struct stat st;
  if (::fstat(f->fd, &st) != 0)
    return makeError(opts.path + ": cannot stat: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    return makeError(opts.path + ": --data-format=" + opts.format +
                     " needs a regular file of token ids");
  uint64_t bytes = static_cast<uint64_t>(st.st_size);
  if (bytes % f->width)
    return makeError(opts.path + ": " + llvm::Twine(bytes) +
                     " bytes is not a whole number of " +
                     llvm::Twine(f->width * 8) + "-bit tokens");
  f->tokens = bytes / f->width;
  // A window, its target one token on, and (sequential) a period of at least 1.
  uint64_t need = static_cast<uint64_t>(f->length) + 2;
  if (f->tokens < need)
    return makeError(
        opts.path + ": " + llvm::Twine(f->tokens) + " tokens, fewer than the " +
        llvm::Twine(need) + " a window of '" + inputName +
        "' (T = " + llvm::Twine(f->length) + ") and its target need");
  return f;
}

/// splitmix64: a counter hashed into 64 uniform bits.
static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t TokenFeeder::windowOffset(uint64_t row) const {
  uint64_t t = static_cast<uint64_t>(length);
  if (sequential)
    return (row * t) % (tokens - t - 1);
  // Uniform in [0, tokens - T) as nanoGPT's torch.randint(len(data) - T):
  // the high half of a 64x64-bit product (bias below 2^-30 for any file).
  uint64_t bits = mix(mix(seed) ^ row);
  return static_cast<uint64_t>(
      (static_cast<unsigned __int128>(bits) * (tokens - t)) >> 64);
}

llvm::Expected<TokenBatch> TokenFeeder::read(uint64_t step) const {
  TokenBatch batch;
  batch.step = step;
  size_t elem = dtype == DType::I64 ? 8 : 4;
  size_t t = static_cast<size_t>(length);
  batch.input.resize(static_cast<size_t>(rows) * t * elem);
  batch.target.resize(batch.input.size());
  std::vector<uint8_t> raw((t + 1) * width);
  for (int64_t r = 0; r < rows; ++r) {
    // Rows of the global batch: this step's, rank 0's first.
    uint64_t row = (step * ranks + rank) * static_cast<uint64_t>(rows) + r;
    uint64_t offset = windowOffset(row);
    size_t done = 0;
    while (done < raw.size()) {
      ssize_t n = ::pread(fd, raw.data() + done, raw.size() - done,
                          static_cast<off_t>(offset * width + done));
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return makeError(
            path + ": step " + llvm::Twine(step) +
            ": cannot read the window at token " + llvm::Twine(offset) + ": " +
            (n < 0 ? std::strerror(errno) : "the file is shorter than it was"));
      done += static_cast<size_t>(n);
    }
    for (size_t i = 0; i <= t; ++i) {
      uint64_t id =
          width == 2
              ? uint64_t(reinterpret_cast<const uint16_t *>(raw.data())[i])
              : uint64_t(reinterpret_cast<const uint32_t *>(raw.data())[i]);
      if ((vocabulary && id >= vocabulary) || (elem == 4 && id > INT32_MAX))
        return makeError(
            path + ": step " + llvm::Twine(step) + ", row " + llvm::Twine(row) +
            ": token " + llvm::Twine(id) + " at position " +
            llvm::Twine(offset + i) + " is outside the embedding's " +
            llvm::Twine(vocabulary ? vocabulary : uint64_t(INT32_MAX) + 1) +
            " ids");
      size_t at = static_cast<size_t>(r) * t;
      auto store = [&](std::vector<uint8_t> &out, size_t index) {
        if (elem == 8) {
          int64_t v = static_cast<int64_t>(id);
          std::memcpy(out.data() + index * 8, &v, 8);
        } else {
          int32_t v = static_cast<int32_t>(id);
          std::memcpy(out.data() + index * 4, &v, 4);
        }
      };
      if (i < t)
        store(batch.input, at + i);
      if (i > 0)
        store(batch.target, at + i - 1);
    }
  }
  return batch;
}

llvm::Error TokenFeeder::feed(Program &program, uint64_t step) {
  llvm::Optional<TokenBatch> batch;
  if (hasAhead) {
    hasAhead = false;
    auto got = ahead.get();
    if (aheadStep != step)
      llvm::consumeError(got.takeError());
    else if (!got)
      return got.takeError();
    else
      batch = std::move(*got);
  }
  if (!batch) {
    auto got = read(step);
    if (!got)
      return got.takeError();
    batch = std::move(*got);
  }
  cpu::TensorRef &in = program.tensor(inputId), &tgt = program.tensor(targetId);
  std::memcpy(in.data, batch->input.data(), batch->input.size());
  std::memcpy(tgt.data, batch->target.data(), batch->target.size());
  // The next step's windows are read while this one computes.
  aheadStep = step + 1;
  ahead = std::async(std::launch::async,
                     [this, next = step + 1] { return read(next); });
  hasAhead = true;
  return llvm::Error::success();
}

} // namespace zinc::rt
