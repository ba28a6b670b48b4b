//===- Safetensors.cpp - safetensors: u64 header size, JSON, raw bytes ----===//
#include "zinc/runtime/Safetensors.h"
#include "zinc/support/BoundedJson.h"
#include "zinc/support/Error.h"
#include "zinc/support/OutputFile.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

namespace zinc::rt {

static llvm::Optional<DType> dtypeFromTag(llvm::StringRef tag) {
  return llvm::StringSwitch<llvm::Optional<DType>>(tag)
      .Case("F32", DType::F32)
      .Case("F64", DType::F64)
      .Case("F16", DType::F16)
      .Case("BF16", DType::BF16)
      .Case("I64", DType::I64)
      .Case("I32", DType::I32)
      .Case("I16", DType::I16)
      .Case("I8", DType::I8)
      .Case("U8", DType::U8)
      .Case("U16", DType::U16)
      .Case("U32", DType::U32)
      .Case("U64", DType::U64)
      .Case("BOOL", DType::Bool)
      .Default(llvm::None);
}

static llvm::StringRef tagOf(DType t) {
  switch (t) {
  case DType::F32: return "F32";
  case DType::F64: return "F64";
  case DType::F16: return "F16";
  case DType::BF16: return "BF16";
  case DType::I64: return "I64";
  case DType::I32: return "I32";
  case DType::I16: return "I16";
  case DType::I8: return "I8";
  case DType::U8: return "U8";
  case DType::U16: return "U16";
  case DType::U32: return "U32";
  case DType::U64: return "U64";
  case DType::Bool: return "BOOL";
  }
  return "?";
}

/// The header's size from the file's first 8 bytes, checked against the
/// file's size and the format's cap.
static llvm::Expected<uint64_t>
headerSizeOf(llvm::StringRef path, llvm::StringRef first8, uint64_t fileSize) {
  auto malformed = [&](const llvm::Twine &why) {
    return makeError(path + ": not a valid safetensors file: " + why);
  };
  if (fileSize < 8 || first8.size() < 8)
    return malformed("shorter than its 8-byte header size");
  uint64_t headerSize = 0;
  for (int i = 0; i < 8; ++i)
    headerSize |= static_cast<uint64_t>(static_cast<uint8_t>(first8[i]))
                  << (8 * i);
  if (headerSize > fileSize - 8)
    return malformed("header size " + llvm::Twine(headerSize) +
                     " runs past the end of the file");
  // The reference implementation's cap: a bigger header is an attack on
  // the JSON parser's memory and time, never a real file's index.
  if (headerSize > kMaxSafetensorsHeaderBytes)
    return malformed("header size " + llvm::Twine(headerSize) +
                     " is over the format's limit of " +
                     llvm::Twine(kMaxSafetensorsHeaderBytes) + " bytes");
  return headerSize;
}

/// Parses the JSON header `header` of a file whose data section (after the
/// header) has `dataSize` bytes into `entries`; views point into `data`,
/// or hold no bytes when it is null.
static llvm::Error parseHeader(llvm::StringRef path, llvm::StringRef header,
                               uint64_t dataSize, const uint8_t *data,
                               llvm::StringMap<SafetensorView> &entries) {
  auto malformed = [&](const llvm::Twine &why) {
    return makeError(path + ": not a valid safetensors file: " + why);
  };
  auto json = parseJson(header);
  if (!json)
    return malformed("header is not JSON: " + llvm::toString(json.takeError()));
  const llvm::json::Object *root = json->getAsObject();
  if (!root)
    return malformed("header is not a JSON object");
  for (const auto &kv : *root) {
    llvm::StringRef name = kv.first;
    if (name == "__metadata__")
      continue;
    const llvm::json::Object *entry = kv.second.getAsObject();
    if (!entry)
      return malformed("entry '" + name + "' is not an object");
    auto tag = entry->getString("dtype");
    auto dtype = tag ? dtypeFromTag(*tag) : llvm::None;
    if (!dtype)
      return malformed("tensor '" + name + "' has an unsupported dtype");
    const llvm::json::Array *shape = entry->getArray("shape");
    const llvm::json::Array *offsets = entry->getArray("data_offsets");
    if (!shape || !offsets || offsets->size() != 2)
      return malformed("tensor '" + name + "' lacks shape or data_offsets");
    SafetensorView view;
    view.dtype = *dtype;
    for (const llvm::json::Value &d : *shape) {
      auto dim = d.getAsInteger();
      if (!dim || *dim < 0)
        return malformed("tensor '" + name + "' has a bad shape");
      view.shape.push_back(*dim);
    }
    auto begin = (*offsets)[0].getAsInteger();
    auto end = (*offsets)[1].getAsInteger();
    if (!begin || !end || *begin < 0 || *end < *begin ||
        static_cast<uint64_t>(*end) > dataSize)
      return malformed("tensor '" + name + "' has data_offsets outside the file");
    llvm::Optional<uint64_t> expected = tensorBytes(view.shape, dtypeSize(view.dtype));
    if (!expected)
      return malformed("tensor '" + name + "' has shape " + formatShape(view.shape) +
                       ", whose size overflows");
    if (static_cast<uint64_t>(*end - *begin) != *expected)
      return malformed("tensor '" + name + "' has " + llvm::Twine(*end - *begin) +
                       " bytes, its shape needs " + llvm::Twine(*expected));
    if (data)
      view.data = llvm::ArrayRef<uint8_t>(data + *begin, *end - *begin);
    entries[name] = view;
  }
  return llvm::Error::success();
}

/// Reads n bytes at `offset` of `fd` into `out`, through short reads and
/// signals; errors start with the path.
static llvm::Error readFully(int fd, char *out, uint64_t n, uint64_t offset,
                             llvm::StringRef path) {
  uint64_t done = 0;
  while (done < n) {
    ssize_t got = ::pread(fd, out + done, n - done,
                          static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      return makeError(path + ": cannot read: " +
                       (got < 0 ? std::strerror(errno)
                                : "the file is shorter than it was"));
    done += static_cast<uint64_t>(got);
  }
  return llvm::Error::success();
}

namespace {
/// A file's bytes read into anonymous pages of its own, unmapped when
/// dropped. Through malloc a dropped shard may stay resident: once glibc has
/// freed a block this large its mmap threshold rises, later ones come from
/// the reading thread's arena, and an arena gives pages back from its top
/// alone, so a run over many shards would hold more than the two it keeps.
class ReadIntoPagesBuffer final : public llvm::MemoryBuffer {
public:
  ReadIntoPagesBuffer(char *base, uint64_t mapped, uint64_t size)
      : base(base), mapped(mapped) {
    init(base, base + size, /*RequiresNullTerminator=*/false);
  }
  ~ReadIntoPagesBuffer() override { ::munmap(base, mapped); }
  BufferKind getBufferKind() const override { return MemoryBuffer_Malloc; }

private:
  char *base;
  uint64_t mapped;
};
} // namespace

namespace {
/// A file open for reading, and its size; closed when dropped.
struct OpenFile {
  int fd = -1;
  uint64_t size = 0;
  OpenFile(int fd, uint64_t size) : fd(fd), size(size) {}
  OpenFile(OpenFile &&o) : fd(std::exchange(o.fd, -1)), size(o.size) {}
  OpenFile(const OpenFile &) = delete;
  OpenFile &operator=(const OpenFile &) = delete;
  OpenFile &operator=(OpenFile &&) = delete;
  ~OpenFile() {
    if (fd >= 0)
      ::close(fd);
  }
};
} // namespace

static llvm::Expected<OpenFile> openForReading(llvm::StringRef path) {
  int fd = ::open(path.str().c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return makeError(path + ": cannot open: " + std::strerror(errno));
  OpenFile file(fd, 0);
  struct stat st;
  if (::fstat(fd, &st) != 0)
    return makeError(path + ": cannot stat: " + std::strerror(errno));
  file.size = static_cast<uint64_t>(st.st_size);
  return std::move(file);
}

/// The whole file at `path`, read before this returns.
static llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>>
readIntoPages(llvm::StringRef path) {
  auto opened = openForReading(path);
  if (!opened)
    return opened.takeError();
  const int fd = opened->fd;
  const uint64_t size = opened->size;
  // One byte more than the file, so that an empty one still maps.
  uint64_t mapped = size + 1;
  void *p = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return makeError(path + ": cannot map " + llvm::Twine(size) +
                     " bytes to read it into: " + std::strerror(errno));
  auto buffer = std::make_unique<ReadIntoPagesBuffer>(static_cast<char *>(p),
                                                      mapped, size);
  if (auto err = readFully(fd, static_cast<char *>(p), size, 0, path))
    return std::move(err);
  return std::unique_ptr<llvm::MemoryBuffer>(std::move(buffer));
}

llvm::Expected<SafetensorsFile> SafetensorsFile::open(llvm::StringRef path,
                                                      bool readIntoMemory) {
  SafetensorsFile file;
  if (readIntoMemory) {
    auto buf = readIntoPages(path);
    if (!buf)
      return buf.takeError();
    file.buffer = std::move(*buf);
  } else {
    auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                           /*RequiresNullTerminator=*/false);
    if (!buf)
      return makeError(path + ": cannot open: " + buf.getError().message());
    file.buffer = std::move(*buf);
  }
  llvm::StringRef bytes = file.buffer->getBuffer();
  auto headerSize = headerSizeOf(path, bytes.take_front(8), bytes.size());
  if (!headerSize)
    return headerSize.takeError();
  llvm::StringRef data = bytes.drop_front(8 + *headerSize);
  if (auto err = parseHeader(path, bytes.substr(8, *headerSize), data.size(),
                             reinterpret_cast<const uint8_t *>(data.data()),
                             file.entries))
    return std::move(err);
  return file;
}

llvm::Expected<SafetensorsFile>
SafetensorsFile::openHeader(llvm::StringRef path) {
  auto opened = openForReading(path);
  if (!opened)
    return opened.takeError();
  const int fd = opened->fd;
  const uint64_t fileSize = opened->size;
  auto readAt = [&](std::string &out, uint64_t offset,
                    uint64_t n) -> llvm::Error {
    out.resize(n);
    return readFully(fd, out.data(), n, offset, path);
  };
  std::string first8, header;
  if (fileSize >= 8)
    if (auto err = readAt(first8, 0, 8))
      return std::move(err);
  auto headerSize = headerSizeOf(path, first8, fileSize);
  if (!headerSize)
    return headerSize.takeError();
  if (auto err = readAt(header, 8, *headerSize))
    return std::move(err);
  SafetensorsFile file;
  if (auto err = parseHeader(path, header, fileSize - 8 - *headerSize, nullptr,
                             file.entries))
    return std::move(err);
  return file;
}

const SafetensorView *SafetensorsFile::find(llvm::StringRef name) const {
  auto it = entries.find(name);
  return it == entries.end() ? nullptr : &it->second;
}

llvm::Error writeSafetensorsStreamed(
    llvm::StringRef path, llvm::ArrayRef<StreamedTensor> tensors,
    llvm::function_ref<llvm::Error(size_t, llvm::raw_ostream &)> writeData,
    llvm::ArrayRef<std::pair<std::string, std::string>> metadata) {
  llvm::json::Object header;
  if (!metadata.empty()) {
    llvm::json::Object meta;
    for (const auto &[key, value] : metadata)
      meta[key] = value;
    header["__metadata__"] = std::move(meta);
  }
  uint64_t offset = 0;
  for (const StreamedTensor &t : tensors) {
    llvm::json::Array shape;
    for (int64_t d : t.shape)
      shape.push_back(d);
    header[t.name] = llvm::json::Object{
        {"dtype", tagOf(t.dtype)},
        {"shape", std::move(shape)},
        {"data_offsets", llvm::json::Array{offset, offset + t.bytes}}};
    offset += t.bytes;
  }
  std::string headerText;
  llvm::raw_string_ostream(headerText) << llvm::json::Value(std::move(header));
  // Pad with spaces so the data starts 8-byte aligned, as the format allows.
  headerText.append((8 - headerText.size() % 8) % 8, ' ');

  return writeOutputFile(path, [&](llvm::raw_ostream &os) -> llvm::Error {
    uint64_t size = headerText.size();
    for (int i = 0; i < 8; ++i)
      os << static_cast<char>((size >> (8 * i)) & 0xff);
    os << headerText;
    for (size_t i = 0; i < tensors.size(); ++i) {
      uint64_t before = os.tell();
      if (llvm::Error err = writeData(i, os))
        return err;
      if (os.tell() - before != tensors[i].bytes)
        return makeError(path + ": tensor '" + tensors[i].name + "' wrote " +
                         llvm::Twine(os.tell() - before) + " bytes, not " +
                         llvm::Twine(tensors[i].bytes));
    }
    return llvm::Error::success();
  });
}

llvm::Error writeSafetensors(llvm::StringRef path,
                             llvm::ArrayRef<NamedTensor> tensors) {
  std::vector<StreamedTensor> headers;
  for (const NamedTensor &t : tensors)
    headers.push_back({t.name, t.dtype, t.shape, t.data.size()});
  return writeSafetensorsStreamed(
      path, headers, [&](size_t i, llvm::raw_ostream &os) {
        os.write(reinterpret_cast<const char *>(tensors[i].data.data()),
                 tensors[i].data.size());
        return llvm::Error::success();
      });
}

} // namespace zinc::rt
