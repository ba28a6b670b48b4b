//===- Safetensors.h - Reading and writing safetensors files --------------===//
#ifndef ZINC_RUNTIME_SAFETENSORS_H
#define ZINC_RUNTIME_SAFETENSORS_H

#include "zinc/support/DType.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"
#include <memory>
#include <string>
#include <utility>

namespace zinc::rt {

/// The largest header SafetensorsFile::open reads, as the reference
/// implementation (safetensors' MAX_HEADER_SIZE) caps it.
constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

/// One tensor of a safetensors file; `data` points into the mapped file.
struct SafetensorView {
  DType dtype = DType::F32;
  llvm::SmallVector<int64_t, 6> shape;
  llvm::ArrayRef<uint8_t> data;
};

/// A safetensors file mapped read-only.
class SafetensorsFile {
public:
  /// Errors start with the path and say what is malformed. The file is
  /// mapped, or with `readIntoMemory` read whole before this returns (a
  /// reader on a thread of its own then leaves no page fault for later) into
  /// pages of its own, given back to the system when the file is dropped.
  static llvm::Expected<SafetensorsFile> open(llvm::StringRef path,
                                              bool readIntoMemory = false);
  /// The header alone, checked as open checks it, read without the data:
  /// the views have shapes and dtypes but no bytes.
  static llvm::Expected<SafetensorsFile> openHeader(llvm::StringRef path);
  const SafetensorView *find(llvm::StringRef name) const;
  const llvm::StringMap<SafetensorView> &tensors() const { return entries; }

private:
  std::unique_ptr<llvm::MemoryBuffer> buffer;
  llvm::StringMap<SafetensorView> entries;
};

/// A tensor to write: bytes are dense and little-endian.
struct NamedTensor {
  std::string name;
  DType dtype = DType::F32;
  llvm::SmallVector<int64_t, 6> shape;
  llvm::ArrayRef<uint8_t> data;
};

/// Writes tensors in the given order (written atomically via a rename).
llvm::Error writeSafetensors(llvm::StringRef path,
                             llvm::ArrayRef<NamedTensor> tensors);

/// A tensor whose bytes writeSafetensorsStreamed asks for when their turn
/// comes: `bytes` of them, dense and little-endian.
struct StreamedTensor {
  std::string name;
  DType dtype = DType::F32;
  llvm::SmallVector<int64_t, 6> shape;
  uint64_t bytes = 0;
};

/// Writes the header, then each tensor's bytes as `writeData(i, os)` prints
/// them, one tensor at a time (nothing is staged: tensors that live on NVMe
/// are read into a buffer of one tensor at a time). All or nothing, as
/// writeSafetensors; `writeData`'s error, or a byte count that differs from
/// the header's, fails the write. `metadata`: the header's `__metadata__`
/// (string to string, as the format allows), left out when empty.
llvm::Error writeSafetensorsStreamed(
    llvm::StringRef path, llvm::ArrayRef<StreamedTensor> tensors,
    llvm::function_ref<llvm::Error(size_t, llvm::raw_ostream &)> writeData,
    llvm::ArrayRef<std::pair<std::string, std::string>> metadata = {});

} // namespace zinc::rt

#endif
