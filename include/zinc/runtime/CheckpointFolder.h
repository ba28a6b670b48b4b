//===- CheckpointFolder.h - A checkpoint directory that is zinc's alone --===//
//
// A --checkpoint-dir may hold other things: another run's checkpoints, a
// user's files, even a user's own "step-1" folder. zinc keeps to its own:
//   - a run holds DIR/.zinc-lock (flock) while it runs, so a second run on
//     the same directory is refused, naming the holder's pid and host;
//   - each manifest records the run's identity: the plan's checksum and a
//     run id (random at a fresh start, inherited by a resume);
//   - pruning (--checkpoint-keep) counts and removes only this run's
//     checkpoints, and removes only the files zinc writes into one, so a
//     user's file inside a checkpoint keeps it (and its folder) alive;
//   - a step-<S> the run would write that is not its own (another run's, or
//     not zinc's) stops the run before step 0 instead of being replaced.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_CHECKPOINTFOLDER_H
#define ZINC_RUNTIME_CHECKPOINTFOLDER_H

#include "llvm/ADT/Optional.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace zinc::rt {

/// Which run wrote a checkpoint.
struct RunIdentity {
  /// The plan's checksum (hex xxHash64 of its serialised form).
  std::string plan;
  /// 16 hex digits, random per fresh run; a resumed run keeps its own.
  std::string run;
};

/// A fresh run id: 64 random bits in hex.
std::string newRunId();

/// The identity in `checkpoint`/manifest.json, or None when there is no
/// zinc manifest there (not a checkpoint, or one written before manifests
/// carried identities: its "run" is then empty).
llvm::Optional<RunIdentity> readRunIdentity(llvm::StringRef checkpoint);

/// "step-<S>" -> S; None for any other name (partial checkpoints included).
llvm::Optional<uint64_t> stepOfCheckpointName(llvm::StringRef name);

/// The lock a run holds on its checkpoint directory; released (and the
/// lock file removed) when destroyed.
class CheckpointLock {
public:
  /// Creates `dir` if need be and locks it; refused, naming the holder,
  /// while another process holds it.
  static llvm::Expected<std::unique_ptr<CheckpointLock>>
  acquire(llvm::StringRef dir);
  ~CheckpointLock();
  CheckpointLock(const CheckpointLock &) = delete;
  CheckpointLock &operator=(const CheckpointLock &) = delete;

private:
  CheckpointLock(int fd, std::string path) : fd(fd), path(std::move(path)) {}
  int fd;
  std::string path;
};

/// Removes the files zinc writes into a checkpoint (complete or partial)
/// under `path`, then the folder if nothing else is left in it. Returns
/// whether the folder is gone; anything else in it is left as it was.
llvm::Expected<bool> removeCheckpointFiles(llvm::StringRef path);

/// Before step 0: every step-<S> under `dir` that the run will write
/// (`willWrite(S)`) must be `id`'s own, or absent; otherwise an error names
/// it and whose it is.
llvm::Error
checkCheckpointsToWrite(llvm::StringRef dir, const RunIdentity &id,
                        llvm::function_ref<bool(uint64_t)> willWrite);

/// Whether `checkpoint` (a step-<S> folder) may be replaced by run `id`:
/// it is `id`'s own. Otherwise an error says whose it is.
llvm::Error checkOwnCheckpoint(llvm::StringRef checkpoint,
                               const RunIdentity &id);

/// The newest zinc checkpoint under `dir` (by step) that is not run `id`'s,
/// if any: a fresh run says it starts beside it rather than from it.
llvm::Optional<std::string> newestCheckpointOfOtherRuns(llvm::StringRef dir,
                                                        const RunIdentity &id);

/// Keeps the newest `keep` checkpoints of run `id` under `dir` (0: all) and
/// removes the rest, and removes partial checkpoints left by processes
/// other than this one (the lock says they are gone). Nothing that is not
/// this run's is touched. `note` hears what was removed or kept back.
llvm::Error pruneCheckpoints(llvm::StringRef dir, unsigned keep,
                             const RunIdentity &id,
                             const std::function<void(llvm::StringRef)> &note);

} // namespace zinc::rt

#endif
