//===- FileInside.cpp - Files a directory's contents may name -------------===//
#include "zinc/support/FileInside.h"
#include "zinc/support/Error.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace zinc {

char PathOutsideError::ID = 0;

void PathOutsideError::log(llvm::raw_ostream &os) const {
  os << "resolves to '" << real << "', outside '" << dir << "'";
}

llvm::Expected<std::string> normalizeRelativePath(llvm::StringRef relative) {
  if (relative.empty())
    return makeError("is empty");
  // The C library would end the name at the NUL.
  if (relative.contains('\0'))
    return makeError("contains a NUL byte");
  if (llvm::sys::path::is_absolute(relative))
    return makeError("is absolute");
  llvm::SmallString<256> normal(relative);
  llvm::sys::path::remove_dots(normal, /*remove_dot_dot=*/true);
  if (normal.empty() || normal == ".." || normal.startswith("../"))
    return makeError("leaves the directory");
  return std::string(normal);
}

static llvm::Expected<std::string> realPath(llvm::StringRef path) {
  llvm::SmallString<256> real;
  if (std::error_code ec = llvm::sys::fs::real_path(path, real))
    return llvm::createStringError(ec, ec.message());
  return std::string(real);
}

llvm::Expected<std::string> resolveInside(llvm::StringRef dir,
                                          llvm::StringRef relative) {
  llvm::Expected<std::string> normal = normalizeRelativePath(relative);
  if (!normal)
    return normal.takeError();
  llvm::Expected<std::string> realDir = realPath(dir.empty() ? "." : dir);
  if (!realDir)
    return realDir.takeError();
  llvm::SmallString<256> joined(*realDir);
  llvm::sys::path::append(joined, *normal);
  llvm::Expected<std::string> real = realPath(joined);
  if (!real)
    return real.takeError();
  // Inside means below: the directory itself is no file of it.
  llvm::StringRef rest(*real);
  bool inside = rest.consume_front(*realDir);
  if (inside && !llvm::StringRef(*realDir).endswith("/"))
    inside = rest.consume_front("/");
  if (!inside || rest.empty())
    return llvm::make_error<PathOutsideError>(*real, *realDir);
  return real;
}

llvm::Expected<int> openInside(llvm::StringRef dir, llvm::StringRef relative) {
  llvm::Expected<std::string> real = resolveInside(dir, relative);
  if (!real)
    return real.takeError();
  // The real path has no symlink left in it; O_NOFOLLOW refuses one put in
  // its place since, and O_NONBLOCK keeps a FIFO from holding the open
  // until a writer comes.
  int fd = ::open(real->c_str(),
                  O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
  if (fd < 0)
    return makeError(std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return makeError(std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return makeError("is not a regular file");
  }
  // Reads of a regular file never block; the flag has done its work.
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

} // namespace zinc
