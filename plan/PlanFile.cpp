//===- PlanFile.cpp - Checksummed binary and text plan containers ---------===//
#include "zinc/plan/PlanFile.h"
#include "zinc/support/Error.h"
#include "zinc/support/OutputFile.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/xxhash.h"
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/text_format.h>

namespace zinc::plan {

static constexpr char kMagic[8] = {'Z', 'I', 'N', 'C', 'P', 'L', 'A', 'N'};
static constexpr size_t kHeaderBytes = 8 + 4 + 4 + 8 + 8;
static constexpr llvm::StringLiteral kTextMagic = "# zinc plan v";

static void putLE(std::string &out, uint64_t v, unsigned bytes) {
  for (unsigned i = 0; i < bytes; ++i)
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

static uint64_t getLE(llvm::StringRef in, size_t at, unsigned bytes) {
  uint64_t v = 0;
  for (unsigned i = 0; i < bytes; ++i)
    v |= static_cast<uint64_t>(static_cast<uint8_t>(in[at + i])) << (8 * i);
  return v;
}

std::string encodePlan(const Plan &plan, PlanEncoding encoding) {
  std::string payload;
  if (encoding == PlanEncoding::Text) {
    google::protobuf::TextFormat::PrintToString(plan, &payload);
    std::string out =
        (kTextMagic + llvm::Twine(kPlanFormatVersion) + "\n").str();
    out +=
        "# checksum " + llvm::utohexstr(llvm::xxHash64(payload), true) + "\n";
    return out + payload;
  }
  // The header, then the payload serialised in place: a plan of 10^6
  // instructions is 130 MB, worth writing once rather than growing a string
  // and copying it behind the header. Deterministic serialisation: equal
  // plans give equal bytes.
  size_t size = plan.ByteSizeLong();
  std::string out(kMagic, sizeof(kMagic));
  putLE(out, kPlanFormatVersion, 4);
  putLE(out, 0, 4);
  putLE(out, size, 8);
  size_t checksumAt = out.size();
  putLE(out, 0, 8);
  out.resize(kHeaderBytes + size);
  {
    google::protobuf::io::ArrayOutputStream raw(&out[kHeaderBytes],
                                                static_cast<int>(size));
    google::protobuf::io::CodedOutputStream coded(&raw);
    coded.SetSerializationDeterministic(true);
    plan.SerializeWithCachedSizes(&coded);
  }
  std::string checksum;
  putLE(checksum, llvm::xxHash64(llvm::StringRef(out).drop_front(kHeaderBytes)),
        8);
  out.replace(checksumAt, 8, checksum);
  return out;
}

static llvm::Expected<Plan> decodeText(llvm::StringRef bytes) {
  auto [versionLine, rest] = bytes.split('\n');
  auto [checksumLine, payload] = rest.split('\n');
  unsigned version = 0;
  if (versionLine.drop_front(kTextMagic.size()).getAsInteger(10, version))
    return makeError("not a zinc plan (bad text header)");
  if (version != kPlanFormatVersion)
    return makeError("plan format version " + llvm::Twine(version) +
                     " is not supported by this zinc (expects " +
                     llvm::Twine(kPlanFormatVersion) + ")");
  if (!checksumLine.consume_front("# checksum "))
    return makeError("corrupt plan: missing checksum line");
  if (checksumLine.trim() != llvm::utohexstr(llvm::xxHash64(payload), true))
    return makeError("corrupt plan: checksum mismatch");
  Plan plan;
  if (!google::protobuf::TextFormat::ParseFromString(payload.str(), &plan))
    return makeError("corrupt plan: text does not parse");
  return plan;
}

llvm::Expected<Plan> decodePlan(llvm::StringRef bytes) {
  if (bytes.startswith(kTextMagic))
    return decodeText(bytes);
  if (bytes.size() < sizeof(kMagic) ||
      !bytes.startswith(llvm::StringRef(kMagic, sizeof(kMagic))))
    return makeError("not a zinc plan (bad magic)");
  if (bytes.size() < kHeaderBytes)
    return makeError("corrupt plan: truncated header");
  uint64_t version = getLE(bytes, 8, 4);
  if (version != kPlanFormatVersion)
    return makeError("plan format version " + llvm::Twine(version) +
                     " is not supported by this zinc (expects " +
                     llvm::Twine(kPlanFormatVersion) + ")");
  uint64_t size = getLE(bytes, 16, 8);
  uint64_t checksum = getLE(bytes, 24, 8);
  llvm::StringRef payload = bytes.drop_front(kHeaderBytes);
  if (payload.size() != size)
    return makeError("corrupt plan: payload is " + llvm::Twine(payload.size()) +
                     " bytes, header says " + llvm::Twine(size) +
                     " (truncated?)");
  if (llvm::xxHash64(payload) != checksum)
    return makeError("corrupt plan: checksum mismatch");
  Plan plan;
  if (!plan.ParseFromArray(payload.data(), static_cast<int>(payload.size())))
    return makeError("corrupt plan: payload does not parse");
  return plan;
}

llvm::Error writePlanFile(const Plan &plan, llvm::StringRef path,
                          PlanEncoding encoding) {
  return writeEncodedPlanFile(encodePlan(plan, encoding), path);
}

llvm::Expected<StagedPlanFile> stagePlanFile(llvm::StringRef bytes,
                                             llvm::StringRef path) {
  llvm::Expected<StagedOutput> staged = stageOutput(path);
  if (!staged)
    return staged.takeError();
  llvm::raw_fd_ostream os(staged->fd, /*shouldClose=*/true);
  os << bytes;
  if (llvm::Error err = closeOutput(os, path)) {
    if (staged->staged != path)
      llvm::sys::fs::remove(staged->staged);
    return err;
  }
  return StagedPlanFile(std::move(staged->staged), path.str());
}

StagedPlanFile::StagedPlanFile(StagedPlanFile &&other)
    : staged(std::move(other.staged)), path(std::move(other.path)) {
  other.staged.clear();
}

StagedPlanFile::~StagedPlanFile() {
  // Bytes written in place (a device) are not ours to remove.
  if (!staged.empty() && staged != path)
    llvm::sys::fs::remove(staged);
}

llvm::Error StagedPlanFile::commit() {
  std::string from = std::move(staged);
  staged.clear();
  return commitOutput(from, path);
}

llvm::Error writeEncodedPlanFile(llvm::StringRef bytes, llvm::StringRef path) {
  auto staged = stagePlanFile(bytes, path);
  if (!staged)
    return staged.takeError();
  return staged->commit();
}

llvm::Expected<Plan> readPlanFile(llvm::StringRef path) {
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                         /*RequiresNullTerminator=*/false);
  if (!buf)
    return makeError(path + ": cannot open: " + buf.getError().message());
  auto plan = decodePlan((*buf)->getBuffer());
  if (!plan)
    return addContext(plan.takeError(), path);
  return plan;
}

} // namespace zinc::plan
