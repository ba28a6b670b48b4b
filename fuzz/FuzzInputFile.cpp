//===- FuzzInputFile.cpp - The fuzz input as a file -----------------------===//
#include "FuzzInputFile.h"
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <map>
#include <unistd.h>

namespace zinc::fuzz {

namespace {
/// A fresh directory, removed with its files at exit.
struct InputDirectory {
  std::string path;
  std::map<std::string, std::string> files;
  InputDirectory() {
    const char *tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/zinc-fuzz-XXXXXX";
    if (!mkdtemp(pattern.data())) {
      std::perror("zinc-fuzz: mkdtemp");
      std::abort();
    }
    path = pattern;
  }
  ~InputDirectory() {
    for (const auto &[name, file] : files)
      ::unlink(file.c_str());
    ::rmdir(path.c_str());
  }
};
} // namespace

const std::string &writeInputFile(const char *name, const uint8_t *data, size_t size) {
  static InputDirectory dir;
  std::string &file = dir.files[name];
  if (file.empty())
    file = dir.path + "/" + name;
  int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    std::perror("zinc-fuzz: open");
    std::abort();
  }
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::write(fd, data + done, size - done);
    if (n <= 0) {
      std::perror("zinc-fuzz: write");
      std::abort();
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return file;
}

} // namespace zinc::fuzz
