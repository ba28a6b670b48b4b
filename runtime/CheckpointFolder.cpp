//===- CheckpointFolder.cpp - A checkpoint directory that is zinc's alone -===//
#include "zinc/runtime/CheckpointFolder.h"
#include "zinc/support/BoundedJson.h"
#include "zinc/support/Error.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <random>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace zinc::rt {

static constexpr const char *kLockName = ".zinc-lock";

/// The files saveCheckpoint writes into a checkpoint; a staged one carries
/// a suffix (OutputFile.h), so these are prefixes.
static constexpr const char *kZincFiles[] = {
    "model.safetensors", "state.safetensors", "manifest.json"};

std::string newRunId() {
  std::random_device device;
  uint64_t id = (static_cast<uint64_t>(device()) << 32) ^ device();
  return llvm::utohexstr(id, /*LowerCase=*/true, /*Width=*/16);
}

llvm::Optional<RunIdentity> readRunIdentity(llvm::StringRef checkpoint) {
  auto text = llvm::MemoryBuffer::getFile(checkpoint + "/manifest.json");
  if (!text)
    return llvm::None;
  auto parsed = parseJson((*text)->getBuffer());
  if (!parsed) {
    llvm::consumeError(parsed.takeError());
    return llvm::None;
  }
  const llvm::json::Object *manifest = parsed->getAsObject();
  if (!manifest ||
      manifest->getString("producer") != llvm::StringRef("zinc-run"))
    return llvm::None;
  RunIdentity id;
  id.plan = manifest->getString("plan_checksum").getValueOr("").str();
  id.run = manifest->getString("run_id").getValueOr("").str();
  return id;
}

llvm::Optional<uint64_t> stepOfCheckpointName(llvm::StringRef name) {
  uint64_t step;
  if (!name.consume_front("step-") || name.getAsInteger(10, step))
    return llvm::None;
  return step;
}

static std::string hostName() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0)
    return "unknown";
  return host;
}

llvm::Expected<std::unique_ptr<CheckpointLock>>
CheckpointLock::acquire(llvm::StringRef dir) {
  if (std::error_code ec = llvm::sys::fs::create_directories(dir))
    return makeError(
        dir + ": cannot create the checkpoint directory: " + ec.message());
  std::string path = (dir + "/" + kLockName).str();
  // A holder that finishes removes the file: one that opened it just before
  // then locks a file nobody else sees, so the lock is retaken on the file
  // that is there.
  for (int attempt = 0; attempt < 16; ++attempt) {
    int fd =
        ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
      return makeError(path +
                       ": cannot open the checkpoint directory's lock: " +
                       std::strerror(errno));
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      int err = errno;
      char holder[512] = {};
      ssize_t n = ::pread(fd, holder, sizeof holder - 1, 0);
      ::close(fd);
      if (err != EWOULDBLOCK)
        return makeError(path + ": cannot lock: " + std::strerror(err));
      llvm::StringRef who = n > 0 ? llvm::StringRef(holder, n).trim()
                                  : llvm::StringRef("a process that has not "
                                                    "written its name yet");
      return makeError(
          dir + ": --checkpoint-dir is in use by another zinc-run (" + who +
          "); two runs in one directory would overwrite "
          "each other's checkpoints: wait for it, or choose "
          "another directory");
    }
    struct stat opened, named;
    if (::fstat(fd, &opened) != 0 || ::stat(path.c_str(), &named) != 0 ||
        opened.st_ino != named.st_ino || opened.st_dev != named.st_dev) {
      ::close(fd);
      continue;
    }
    char since[64] = "?";
    std::time_t now = std::time(nullptr);
    struct tm utc;
    if (::gmtime_r(&now, &utc))
      std::strftime(since, sizeof since, "%Y-%m-%dT%H:%M:%SZ", &utc);
    std::string who = "pid " + std::to_string(::getpid()) + " on host " +
                      hostName() + ", since " + since + "\n";
    if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, who.data(), who.size(), 0) !=
                                       static_cast<ssize_t>(who.size())) {
      int err = errno;
      ::close(fd);
      return makeError(path + ": cannot write: " + std::strerror(err));
    }
    return std::unique_ptr<CheckpointLock>(new CheckpointLock(fd, path));
  }
  return makeError(path + ": cannot lock: the lock file keeps being replaced");
}

CheckpointLock::~CheckpointLock() {
  // Removed while still locked, so that no one locks the old file after.
  ::unlink(path.c_str());
  ::close(fd);
}

static bool isZincFile(llvm::StringRef name) {
  return llvm::any_of(kZincFiles, [&](const char *file) {
    return name == file || name.startswith((llvm::Twine(file) + ".tmp").str());
  });
}

llvm::Expected<bool> removeCheckpointFiles(llvm::StringRef path) {
  std::error_code ec;
  std::vector<std::string> ours;
  bool foreign = false;
  for (llvm::sys::fs::directory_iterator it(path, ec), end; it != end && !ec;
       it.increment(ec)) {
    if (isZincFile(llvm::sys::path::filename(it->path())) &&
        it->type() != llvm::sys::fs::file_type::directory_file)
      ours.push_back(it->path());
    else
      foreign = true;
  }
  if (ec)
    return makeError(path + ": cannot list: " + ec.message());
  for (const std::string &file : ours)
    if (std::error_code rm = llvm::sys::fs::remove(file))
      return makeError(file + ": cannot remove: " + rm.message());
  if (foreign)
    return false;
  if (std::error_code rm = llvm::sys::fs::remove(path))
    return makeError(path + ": cannot remove: " + rm.message());
  return true;
}

/// Whose `checkpoint` is, for diagnostics: "run <id> of plan <sum>", "a
/// checkpoint written without a run identity" or "not zinc's".
static std::string ownerOf(llvm::StringRef checkpoint) {
  auto id = readRunIdentity(checkpoint);
  if (!id)
    return "not a zinc checkpoint (no zinc manifest.json)";
  if (id->run.empty())
    return "a checkpoint of an earlier zinc-run, without a run identity";
  return "a checkpoint of another run (run " + id->run + ", plan " + id->plan +
         ")";
}

llvm::Error checkOwnCheckpoint(llvm::StringRef checkpoint,
                               const RunIdentity &id) {
  auto theirs = readRunIdentity(checkpoint);
  if (theirs && !theirs->run.empty() && theirs->run == id.run)
    return llvm::Error::success();
  return makeError(checkpoint + ": " + ownerOf(checkpoint) +
                   "; zinc replaces only its own run's checkpoints: remove "
                   "it, or choose another --checkpoint-dir");
}

llvm::Error
checkCheckpointsToWrite(llvm::StringRef dir, const RunIdentity &id,
                        llvm::function_ref<bool(uint64_t)> willWrite) {
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec;
       it.increment(ec)) {
    auto step = stepOfCheckpointName(llvm::sys::path::filename(it->path()));
    if (step && willWrite(*step))
      if (auto err = checkOwnCheckpoint(it->path(), id))
        return err;
  }
  if (ec && ec != std::errc::no_such_file_or_directory)
    return makeError(dir + ": cannot list: " + ec.message());
  return llvm::Error::success();
}

llvm::Optional<std::string> newestCheckpointOfOtherRuns(llvm::StringRef dir,
                                                        const RunIdentity &id) {
  llvm::Optional<std::pair<uint64_t, std::string>> newest;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec;
       it.increment(ec)) {
    auto step = stepOfCheckpointName(llvm::sys::path::filename(it->path()));
    if (!step || (newest && *step <= newest->first))
      continue;
    auto theirs = readRunIdentity(it->path());
    if (theirs && theirs->run != id.run)
      newest = std::make_pair(*step, it->path());
  }
  if (!newest)
    return llvm::None;
  return newest->second;
}

/// "step-<S>.partial-<pid>" -> pid.
static llvm::Optional<int> writerOfPartial(llvm::StringRef name) {
  size_t at = name.find(".partial-");
  int pid;
  if (!name.startswith("step-") || at == llvm::StringRef::npos ||
      name.drop_front(at + 9).getAsInteger(10, pid))
    return llvm::None;
  return pid;
}

llvm::Error pruneCheckpoints(llvm::StringRef dir, unsigned keep,
                             const RunIdentity &id,
                             const std::function<void(llvm::StringRef)> &note) {
  std::vector<std::pair<uint64_t, std::string>> own;
  std::vector<std::string> stale;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec;
       it.increment(ec)) {
    llvm::StringRef name = llvm::sys::path::filename(it->path());
    if (auto step = stepOfCheckpointName(name)) {
      auto theirs = readRunIdentity(it->path());
      if (theirs && !theirs->run.empty() && theirs->run == id.run)
        own.push_back({*step, it->path()});
    } else if (auto pid = writerOfPartial(name); pid && *pid != ::getpid()) {
      // The lock is ours: whoever wrote it is no longer writing.
      stale.push_back(it->path());
    }
  }
  if (ec)
    return makeError(dir + ": cannot list: " + ec.message());
  std::sort(stale.begin(), stale.end());
  for (const std::string &path : stale) {
    auto gone = removeCheckpointFiles(path);
    if (!gone)
      return gone.takeError();
    if (note)
      note(*gone
               ? "removed " + path + ", a checkpoint its process did not finish"
               : "kept " + path +
                     ", a checkpoint its process did not "
                     "finish: it holds files zinc did not write");
  }
  if (!keep || own.size() <= keep)
    return llvm::Error::success();
  std::sort(own.begin(), own.end());
  for (size_t i = 0; i + keep < own.size(); ++i) {
    auto gone = removeCheckpointFiles(own[i].second);
    if (!gone)
      return gone.takeError();
    if (!*gone && note)
      note("kept " + own[i].second +
           " beyond --checkpoint-keep: it holds files "
           "zinc did not write (zinc's own were removed)");
  }
  return llvm::Error::success();
}

} // namespace zinc::rt
