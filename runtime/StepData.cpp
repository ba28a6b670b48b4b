//===- StepData.cpp - Graph inputs from safetensors files and shard folders
//===//
#include "zinc/runtime/StepData.h"
#include "zinc/support/Error.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include <algorithm>
#include <cstring>

namespace zinc::rt {

llvm::Expected<int64_t>
checkStepTensors(Program &program,
                 const llvm::StringMap<SafetensorView> &tensors,
                 llvm::StringRef path) {
  unsigned ranks = program.ranks();
  const plan::Tensor *first = nullptr;
  int64_t firstSteps = 0;
  for (uint32_t id : program.getPlan().inputs()) {
    const plan::Tensor &t = program.getPlan().tensors(id);
    const cpu::TensorRef &ref = program.tensor(id);
    auto it = tensors.find(t.name());
    if (it == tensors.end())
      return makeError(path + ": no tensor '" + t.name() +
                       "' for the graph input of that name");
    const SafetensorView &view = it->second;
    // With several ranks each step holds the whole batch: every rank's
    // share, rank r's the r-th 1/N of the batch (first) dimension.
    llvm::SmallVector<int64_t, 6> want{view.shape.empty() ? 0 : view.shape[0]};
    want.append(ref.shape.begin(), ref.shape.end());
    if (ranks > 1 && want.size() > 1)
      want[1] *= ranks;
    if (view.dtype != ref.dtype || view.shape.empty() || view.shape[0] < 1 ||
        llvm::ArrayRef<int64_t>(view.shape) != llvm::ArrayRef<int64_t>(want)) {
      std::string expected =
          dtypeName(ref.dtype).str() + "[steps," +
          formatShape(llvm::ArrayRef<int64_t>(want).drop_front()).substr(1);
      return makeError(
          path + ": tensor '" + t.name() + "' is " + dtypeName(view.dtype) +
          formatShape(view.shape) + ", expected " + expected +
          (ranks > 1 && want.size() > 1
               ? " (the batch of all " + std::to_string(ranks) +
                     " ranks: each takes " + std::to_string(ref.shape[0]) + ")"
               : std::string()));
    }
    // Each input cycling through its own length would pair step i's
    // tokens with another step's targets, silently.
    if (!first) {
      first = &t;
      firstSteps = view.shape[0];
    } else if (view.shape[0] != firstSteps) {
      return makeError(path + ": tensor '" + first->name() + "' holds " +
                       llvm::Twine(firstSteps) + " steps and tensor '" +
                       t.name() + "' " + llvm::Twine(view.shape[0]) +
                       "; every graph input needs the same step count");
    }
  }
  return firstSteps;
}

void feedStepSlice(Program &program, const SafetensorsFile &file,
                   uint64_t index) {
  unsigned rank = program.rank(), ranks = program.ranks();
  for (uint32_t id : program.getPlan().inputs()) {
    cpu::TensorRef &ref = program.tensor(id);
    const SafetensorView *view =
        file.find(program.getPlan().tensors(id).name());
    size_t slice = ref.byteSize();
    // A scalar input is the same for every rank; a batch is split.
    size_t share = ref.shape.empty() ? 1 : ranks;
    size_t at = (index * share + (share > 1 ? rank : 0)) * slice;
    std::memcpy(ref.data, view->data.data() + at, slice);
  }
}

ShardFeeder::~ShardFeeder() {
  if (hasAhead)
    llvm::consumeError(ahead.get().takeError());
}

/// How `shard`'s tensor `name` departs from the first shard's, or empty.
static std::string layoutDifference(const SafetensorView &first,
                                    const SafetensorView &shard) {
  if (first.dtype != shard.dtype)
    return (llvm::Twine("is ") + dtypeName(shard.dtype) +
            ", the first shard's " + dtypeName(first.dtype))
        .str();
  llvm::ArrayRef<int64_t> a(first.shape), b(shard.shape);
  if (a.empty() || b.empty() || a.drop_front() != b.drop_front())
    return "is " + formatShape(b) + ", the first shard's " + formatShape(a) +
           " (shards may differ in their step counts alone)";
  return "";
}

/// Checks a shard's tensors against the first shard's: the same names, and
/// per name the same dtype and shape past the step axis.
static llvm::Error checkAgainstFirst(const SafetensorsFile &first,
                                     const SafetensorsFile &shard,
                                     llvm::StringRef firstPath,
                                     llvm::StringRef path) {
  // Sorted, so that the tensor named is the same from run to run.
  std::vector<llvm::StringRef> names;
  for (const auto &kv : first.tensors())
    names.push_back(kv.first());
  llvm::sort(names);
  for (llvm::StringRef name : names) {
    const SafetensorView *view = shard.find(name);
    if (!view)
      return makeError(path + ": no tensor '" + name +
                       "', which the first shard (" +
                       llvm::sys::path::filename(firstPath) +
                       ") holds; every shard needs the same tensors");
    std::string why = layoutDifference(*first.find(name), *view);
    if (!why.empty())
      return makeError(path + ": tensor '" + name + "' " + why);
  }
  std::vector<llvm::StringRef> extra;
  for (const auto &kv : shard.tensors())
    if (!first.find(kv.first()))
      extra.push_back(kv.first());
  if (!extra.empty()) {
    llvm::sort(extra);
    return makeError(path + ": tensor '" + extra.front() +
                     "' is not in the first shard (" +
                     llvm::sys::path::filename(firstPath) +
                     "); every shard needs the same tensors");
  }
  return llvm::Error::success();
}

/// The step count of a shard: the graph inputs' (other tensors are not fed,
/// as in a --data file), which must agree.
static llvm::Expected<uint64_t>
stepsOf(Program &program, const SafetensorsFile &shard, llvm::StringRef path) {
  int64_t steps = -1;
  llvm::StringRef firstName;
  for (uint32_t id : program.getPlan().inputs()) {
    llvm::StringRef name = program.getPlan().tensors(id).name();
    const SafetensorView *v = shard.find(name);
    if (!v)
      return makeError(path + ": no tensor '" + name +
                       "' for the graph input of that name");
    int64_t s = v->shape.empty() ? 0 : v->shape[0];
    if (s < 1)
      return makeError(path + ": tensor '" + name + "' is " +
                       formatShape(v->shape) +
                       ": a shard holds one step or more along its first axis");
    if (steps < 0) {
      steps = s;
      firstName = name;
    } else if (s != steps) {
      return makeError(path + ": tensor '" + firstName + "' holds " +
                       llvm::Twine(steps) + " steps and tensor '" + name +
                       "' " + llvm::Twine(s) +
                       "; every graph input needs the same step count");
    }
  }
  return static_cast<uint64_t>(std::max<int64_t>(steps, 1));
}

llvm::Expected<std::unique_ptr<ShardFeeder>>
ShardFeeder::open(Program &program, llvm::StringRef dir,
                  const std::function<void(llvm::StringRef)> &note) {
  std::unique_ptr<ShardFeeder> f(new ShardFeeder());
  f->program = &program;
  std::vector<std::string> paths;
  unsigned ignored = 0;
  std::string firstIgnored;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec;
       it.increment(ec)) {
    llvm::StringRef name = llvm::sys::path::filename(it->path());
    // Following symbolic links: a folder of links to shards elsewhere is one.
    llvm::sys::fs::file_status status;
    bool regular = !llvm::sys::fs::status(it->path(), status) &&
                   llvm::sys::fs::is_regular_file(status);
    if (regular && name.endswith(".safetensors") && !name.startswith(".")) {
      paths.push_back(it->path());
      continue;
    }
    if (!ignored || name < firstIgnored)
      firstIgnored = name.str();
    ++ignored;
  }
  if (ec)
    return makeError(dir +
                     ": cannot list the shard directory: " + ec.message());
  if (paths.empty())
    return makeError(dir +
                     ": no shards: --data=DIR reads the files named "
                     "*.safetensors in a folder, and this one " +
                     (ignored
                          ? "has none (" + llvm::Twine(ignored) +
                                " other entr" + (ignored == 1 ? "y" : "ies") +
                                ", such as '" + firstIgnored + "')"
                          : llvm::Twine("is empty")));
  if (ignored && note)
    note((dir + ": " + llvm::Twine(ignored) + " entr" +
          (ignored == 1 ? "y" : "ies") + " not named *.safetensors (such as '" +
          firstIgnored + "') left out of the shards")
             .str());
  // Byte order of the names: shard-00010 after shard-00009, as a user
  // numbering them with leading zeros means.
  llvm::sort(paths, [](const std::string &a, const std::string &b) {
    return llvm::sys::path::filename(a) < llvm::sys::path::filename(b);
  });
  for (const std::string &path : paths) {
    auto header = SafetensorsFile::openHeader(path);
    if (!header)
      return header.takeError();
    if (f->shards.empty()) {
      auto steps = checkStepTensors(program, header->tensors(), path);
      if (!steps)
        return steps.takeError();
    } else if (auto err = checkAgainstFirst(f->layout, *header,
                                            f->shards.front().path, path)) {
      return std::move(err);
    }
    auto steps = stepsOf(program, *header, path);
    if (!steps)
      return steps.takeError();
    f->shards.push_back({path, f->total, *steps});
    f->total += *steps;
    if (f->shards.size() == 1)
      f->layout = std::move(*header);
  }
  return f;
}

llvm::Expected<SafetensorsFile> ShardFeeder::load(size_t index) const {
  const Shard &shard = shards[index];
  auto file = SafetensorsFile::open(shard.path, /*readIntoMemory=*/true);
  if (!file)
    return file.takeError();
  // The folder may change under a long run; a shard must still be what its
  // header said at the start, or the step count of the run would be wrong.
  if (auto err =
          checkAgainstFirst(layout, *file, shards.front().path, shard.path))
    return makeError(llvm::toString(std::move(err)) +
                     " (changed since the run started)");
  auto steps = stepsOf(*program, *file, shard.path);
  if (!steps)
    return steps.takeError();
  if (*steps != shard.steps)
    return makeError(shard.path + ": holds " + llvm::Twine(*steps) +
                     " steps, not the " + llvm::Twine(shard.steps) +
                     " it held when the run started");
  return file;
}

llvm::Error ShardFeeder::feed(Program &program, uint64_t step) {
  uint64_t index = step % total;
  // The last shard whose first step is at or before `index`.
  size_t k = static_cast<size_t>(
      std::upper_bound(shards.begin(), shards.end(), index,
                       [](uint64_t i, const Shard &s) { return i < s.first; }) -
      shards.begin() - 1);
  if (!current || currentIndex != k) {
    // Dropped before the next is read: at most two shards are resident.
    current.reset();
    llvm::Optional<SafetensorsFile> loaded;
    if (hasAhead) {
      hasAhead = false;
      auto got = ahead.get();
      if (aheadIndex != k)
        llvm::consumeError(got.takeError());
      else if (!got)
        return got.takeError();
      else
        loaded = std::move(*got);
    }
    if (!loaded) {
      auto got = load(k);
      if (!got)
        return got.takeError();
      loaded = std::move(*got);
    }
    current = std::move(loaded);
    currentIndex = k;
  }
  feedStepSlice(program, *current, index - shards[k].first);
  // The next shard is read while this one's steps compute.
  size_t next = (k + 1) % shards.size();
  if (!hasAhead && next != k) {
    aheadIndex = next;
    ahead = std::async(std::launch::async, [this, next] { return load(next); });
    hasAhead = true;
  }
  return llvm::Error::success();
}

} // namespace zinc::rt
