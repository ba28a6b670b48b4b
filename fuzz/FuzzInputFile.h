//===- FuzzInputFile.h - The fuzz input as a file, for path-taking APIs ---===//
//
// The frontend and the safetensors reader take a path, as zinc-compile and
// zinc-run hand them one: each input is written to one file per process
// (in $TMPDIR, a fresh directory) with the extension the reader keys on,
// and removed at exit.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_FUZZ_FUZZINPUTFILE_H
#define ZINC_FUZZ_FUZZINPUTFILE_H

#include <cstddef>
#include <cstdint>
#include <string>

namespace zinc::fuzz {

/// Writes `data` to this process's input file named `name` (e.g.
/// "model.onnx") and returns its path; aborts when it cannot (a broken
/// fuzzing setup, not a finding).
const std::string &writeInputFile(const char *name, const uint8_t *data, size_t size);

} // namespace zinc::fuzz

#endif
