//===- TierFile.cpp - Creating, preallocating and removing the tier file --===//
//
// The tier's blocks are allocated up front so that a disk too small for the
// plan fails at start-up, naming the directory and the bytes, rather than with
// ENOSPC from an io_getevents in the middle of a training step.
//
//===----------------------------------------------------------------------===//
#include "TierFile.h"
#include "zinc/runtime/storage/AlignedBuffer.h"
#include "zinc/support/Error.h"
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

namespace zinc::storage::detail {

static llvm::Error syscallError(llvm::StringRef path, llvm::StringRef call,
                                int errnum) {
  return makeError("nvme tier: " + path + ": " + call + ": " +
                   std::strerror(errnum));
}

static llvm::Error noSpaceError(llvm::StringRef dir, uint64_t bytes,
                                uint64_t available) {
  return makeError("nvme tier: not enough space in '" + dir +
                   "': the tier needs " + llvm::Twine(bytes) + " bytes, " +
                   llvm::Twine(available) + " are available");
}

/// Allocates the file's blocks: fallocate, or glibc's emulation where the
/// filesystem has no fallocate.
static llvm::Error preallocate(int fd, llvm::StringRef path,
                               llvm::StringRef dir, uint64_t bytes) {
  int rc;
  do
    rc = ::fallocate(fd, 0, 0, static_cast<off_t>(bytes));
  while (rc != 0 && errno == EINTR);
  if (rc == 0)
    return llvm::Error::success();
  int err = errno;
  if (err == EOPNOTSUPP) {
    err = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
    if (err == 0)
      return llvm::Error::success();
  }
  if (err == ENOSPC || err == EDQUOT || err == EFBIG) {
    struct statvfs vfs;
    uint64_t available =
        ::statvfs(std::string(dir).c_str(), &vfs) == 0
            ? static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize
            : 0;
    return addContext(noSpaceError(dir, bytes, available),
                      llvm::Twine("fallocate: ") + std::strerror(err));
  }
  return syscallError(path, "fallocate", err);
}

/// Writes and reads back one sector through the O_DIRECT descriptor: some
/// filesystems accept O_DIRECT at open and refuse it (EINVAL) on transfer.
/// Returns 0, or the errno of the failed transfer.
static int probeDirect(int fd) {
  auto buffer = AlignedBuffer::allocate(kIoAlignment);
  if (!buffer) {
    llvm::consumeError(buffer.takeError());
    return ENOMEM;
  }
  ssize_t n;
  do
    n = ::pwrite(fd, buffer->data(), kIoAlignment, 0);
  while (n < 0 && errno == EINTR);
  if (n < 0)
    return errno;
  do
    n = ::pread(fd, buffer->data(), kIoAlignment, 0);
  while (n < 0 && errno == EINTR);
  return n < 0 ? errno : 0;
}

static void warnBuffered(const std::function<void(llvm::StringRef)> &warn,
                         llvm::StringRef dir) {
  if (warn)
    warn(("nvme tier: O_DIRECT is not supported on " + dir +
          " (tmpfs?); using buffered I/O, which is slower and goes through "
          "the page cache")
             .str());
}

llvm::Expected<TierFile>
createTierFile(llvm::StringRef dir, uint64_t bytes, bool forceBuffered,
               const std::function<void(llvm::StringRef)> &warn) {
  std::string dirStr = dir.str();
  struct stat st;
  if (::stat(dirStr.c_str(), &st) != 0) {
    if (errno == ENOENT)
      return makeError("nvme tier: directory '" + dir + "' does not exist");
    return syscallError(dir, "stat", errno);
  }
  if (!S_ISDIR(st.st_mode))
    return makeError("nvme tier: '" + dir + "' is not a directory");

  // Refuse before touching the disk: an fallocate that fails with ENOSPC
  // would first fill the filesystem others are using.
  struct statvfs vfs;
  if (::statvfs(dirStr.c_str(), &vfs) != 0)
    return syscallError(dir, "statvfs", errno);
  uint64_t available = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  if (available < bytes)
    return noSpaceError(dir, bytes, available);

  static std::atomic<unsigned> counter{0};
  TierFile file;
  file.path = (dir + "/zinc-nvme-" + llvm::Twine(::getpid()) + "-" +
               llvm::Twine(counter++) + ".tier")
                  .str();
  int flags = O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC;
  file.direct = !forceBuffered;
  file.fd =
      ::open(file.path.c_str(), flags | (file.direct ? O_DIRECT : 0), 0600);
  if (file.fd < 0 && file.direct && errno == EINVAL) {
    file.direct = false;
    warnBuffered(warn, dir);
    file.fd = ::open(file.path.c_str(), flags, 0600);
  }
  if (file.fd < 0)
    return syscallError(file.path, "open", errno);

  if (llvm::Error err = preallocate(file.fd, file.path, dir, bytes)) {
    closeTierFile(file, /*keep=*/false);
    return err;
  }
  if (file.direct) {
    if (int err = probeDirect(file.fd)) {
      if (err != EINVAL) {
        closeTierFile(file, /*keep=*/false);
        return syscallError(file.path, "O_DIRECT probe (pwrite/pread)", err);
      }
      int fl = ::fcntl(file.fd, F_GETFL);
      if (fl < 0 || ::fcntl(file.fd, F_SETFL, fl & ~O_DIRECT) != 0) {
        int e = errno;
        closeTierFile(file, /*keep=*/false);
        return syscallError(file.path, "fcntl(F_SETFL, ~O_DIRECT)", e);
      }
      file.direct = false;
      warnBuffered(warn, dir);
    }
  }
  return file;
}

void closeTierFile(TierFile &file, bool keep) {
  if (file.fd >= 0)
    ::close(file.fd);
  file.fd = -1;
  if (!keep && !file.path.empty())
    ::unlink(file.path.c_str());
}

} // namespace zinc::storage::detail
