//===- PlanFile.h - Reading and writing checksummed plan files ------------===//
//
// Binary container: "ZINCPLAN" | u32 format version | u32 zero | u64 payload
// bytes | u64 xxHash64 of the payload | payload (the Plan protobuf).
// Text container: "# zinc plan v<N>\n# checksum <hex>\n" then the protobuf
// text format; the checksum covers the text after the two header lines.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_PLAN_PLANFILE_H
#define ZINC_PLAN_PLANFILE_H

#include "Plan.pb.h"
#include "llvm/Support/Error.h"

namespace zinc::plan {

/// Version of the plan file format this build reads and writes.
constexpr uint32_t kPlanFormatVersion = 2;

enum class PlanEncoding { Binary, Text };

/// Serialises `plan` into the container bytes.
std::string encodePlan(const Plan &plan, PlanEncoding encoding);
/// Parses container bytes (either encoding); errors say what is wrong
/// (not a plan, other version, truncated, checksum mismatch).
llvm::Expected<Plan> decodePlan(llvm::StringRef bytes);

/// Writes atomically: a temporary file renamed into place, so a failed
/// compile never leaves a partial plan behind.
llvm::Error writePlanFile(const Plan &plan, llvm::StringRef path,
                          PlanEncoding encoding);
/// The same for bytes encodePlan made.
llvm::Error writeEncodedPlanFile(llvm::StringRef bytes, llvm::StringRef path);
/// A plan written beside its destination, not yet in place: commit()
/// renames it over `path`; destroyed uncommitted, it is removed. zinc-compile
/// stages the plan while the verifier runs and commits only a verified one.
class StagedPlanFile {
public:
  StagedPlanFile(StagedPlanFile &&other);
  StagedPlanFile &operator=(StagedPlanFile &&) = delete;
  ~StagedPlanFile();
  llvm::Error commit();

private:
  friend llvm::Expected<StagedPlanFile> stagePlanFile(llvm::StringRef,
                                                      llvm::StringRef);
  StagedPlanFile(std::string staged, std::string path)
      : staged(std::move(staged)), path(std::move(path)) {}
  std::string staged, path;
};
/// Writes `bytes` to a temporary file beside `path`.
llvm::Expected<StagedPlanFile> stagePlanFile(llvm::StringRef bytes,
                                             llvm::StringRef path);
/// Errors start with the path.
llvm::Expected<Plan> readPlanFile(llvm::StringRef path);

} // namespace zinc::plan

#endif
