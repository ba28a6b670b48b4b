//===- plan.cpp - Fuzzes the plan loader ----------------------------------===//
//
// What zinc-run and zinc-dump do with a plan file before anything runs:
// decode the container (magic, version, size, xxHash64 checksum, protobuf
// payload; or the text form), verify the plan (tensors, tiers, streams,
// events, effects) and print it. The first byte picks how the rest is
// read: as a whole file, or as a payload that gets a valid binary header
// and checksum, so that mutations reach the protobuf decoder, the verifier
// and the printer rather than stopping at the checksum.
//
//===----------------------------------------------------------------------===//
#include "zinc/plan/PlanDump.h"
#include "zinc/plan/PlanFile.h"
#include "zinc/plan/PlanVerifier.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/xxhash.h"

namespace {
void putLE(std::string &out, uint64_t v, unsigned bytes) {
  for (unsigned i = 0; i < bytes; ++i)
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

/// `payload` in the binary container of plan/PlanFile.cpp.
std::string contained(llvm::StringRef payload) {
  std::string out = "ZINCPLAN";
  putLE(out, zinc::plan::kPlanFormatVersion, 4);
  putLE(out, 0, 4);
  putLE(out, payload.size(), 8);
  putLE(out, llvm::xxHash64(payload), 8);
  return out + payload.str();
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0)
    return 0;
  llvm::StringRef rest(reinterpret_cast<const char *>(data) + 1, size - 1);
  std::string bytes = data[0] & 1 ? contained(rest) : rest.str();
  auto plan = zinc::plan::decodePlan(bytes);
  if (!plan) {
    llvm::consumeError(plan.takeError());
    return 0;
  }
  if (llvm::Error err = zinc::plan::verifyPlan(*plan)) {
    llvm::consumeError(std::move(err));
    return 0;
  }
  // A verified plan prints.
  std::string text;
  llvm::raw_string_ostream os(text);
  zinc::plan::dumpPlanText(*plan, os);
  return 0;
}
