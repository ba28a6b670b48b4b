//===- StepData.h - Graph inputs from safetensors files and shard folders -===//
//
// zinc-run --data=FILE.safetensors: one tensor per graph input, named after
// it, the step as its first axis; step i feeds slice i mod the step count.
// zinc-run --data=DIR: a folder of such files (shards), read in byte order
// of their names as one file holding them all, streamed: at most the shard
// being fed and the next one are in memory, the next one read on a thread
// of its own while the current one's steps compute.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_STEPDATA_H
#define ZINC_RUNTIME_STEPDATA_H

#include "zinc/runtime/Program.h"
#include "zinc/runtime/Safetensors.h"
#include "llvm/Support/Error.h"
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

namespace zinc::rt {

/// Checks `tensors` (a data file's or a shard's, read from `path`) against
/// the plan's graph inputs: a tensor of each input's name and dtype, shaped
/// [steps, the input's shape] (with several ranks, the batch axis holding
/// every rank's rows), every input with the same step count, which it
/// returns. Tensors that are no graph input are ignored.
llvm::Expected<int64_t>
checkStepTensors(Program &program,
                 const llvm::StringMap<SafetensorView> &tensors,
                 llvm::StringRef path);

/// Writes slice `index` of `file`'s tensors (checked by checkStepTensors)
/// into the graph inputs: this rank's share of each batch, a scalar input
/// whole.
void feedStepSlice(Program &program, const SafetensorsFile &file,
                   uint64_t index);

/// --data=DIR.
class ShardFeeder {
public:
  ~ShardFeeder();
  /// Lists `dir`'s shards (regular files named *.safetensors, in byte order
  /// of their names; other entries are left alone, and `note` says how
  /// many) and reads their headers: the first is checked against the plan
  /// (checkStepTensors), every other must hold the same tensor names, and
  /// per name the same dtype and shape past the step axis. Refusals name
  /// the shard.
  static llvm::Expected<std::unique_ptr<ShardFeeder>>
  open(Program &program, llvm::StringRef dir,
       const std::function<void(llvm::StringRef)> &note);
  /// Feeds step `step` (slice `step mod` the steps of all shards, shards
  /// after one another), loading its shard if it is not the one in memory
  /// and starting to read the next.
  llvm::Error feed(Program &program, uint64_t step);

  uint64_t totalSteps() const { return total; }

private:
  struct Shard {
    std::string path;
    /// The step of the concatenation its first slice is.
    uint64_t first = 0;
    uint64_t steps = 0;
  };
  ShardFeeder() = default;
  /// Shard `index` read whole and checked against the header it had at open.
  llvm::Expected<SafetensorsFile> load(size_t index) const;

  Program *program = nullptr;
  std::vector<Shard> shards;
  /// The first shard's header: every shard must keep to it.
  SafetensorsFile layout;
  uint64_t total = 0;
  llvm::Optional<SafetensorsFile> current;
  size_t currentIndex = 0;
  std::future<llvm::Expected<SafetensorsFile>> ahead;
  size_t aheadIndex = 0;
  bool hasAhead = false;
};

} // namespace zinc::rt

#endif
