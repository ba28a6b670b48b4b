//===- checkpoint-manifest.cpp - Fuzzes reading a checkpoint's manifest ---===//
//
// The bytes are a step-<S>/manifest.json in a --checkpoint-dir, as zinc-run
// reads every one it finds there (a folder others write to as well) to
// tell its own checkpoints from anyone else's: any text must be an
// identity or not zinc's, never a crash.
//
//===----------------------------------------------------------------------===//
#include "FuzzInputFile.h"
#include "zinc/runtime/CheckpointFolder.h"
#include "llvm/Support/Path.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string &path = zinc::fuzz::writeInputFile("manifest.json", data, size);
  (void)zinc::rt::readRunIdentity(llvm::sys::path::parent_path(path));
  return 0;
}
