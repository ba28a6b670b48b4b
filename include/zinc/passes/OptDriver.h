//===- OptDriver.h - What zinc-opt does, as a library function ------------===//
//
// zinc-opt reads the IR text form, verifies it, runs a pipeline and prints
// the result; keeping that here leaves the tool a thin main and lets unit
// tests drive it without a process.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_PASSES_OPTDRIVER_H
#define ZINC_PASSES_OPTDRIVER_H

#include "zinc/passes/PassManager.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"
#include <functional>
#include <string>

namespace zinc::passes {

struct OptOptions {
  /// Comma-separated pass arguments: "dce,dce".
  std::string pipeline;
  /// Verify the parsed input and the graph after each pass that changed it.
  bool verify = true;
  /// Further settings of the pass manager (dumps, timing), applied after
  /// the pipeline is parsed; an error stops the run.
  std::function<llvm::Error(PassManager &)> configure;
  /// Treat each chunk between lines reading `// -----` as its own graph,
  /// so one lit file can hold many small cases.
  bool splitInputFile = false;
};

/// Runs zinc-opt over `text`: results to `out` (chunks separated by
/// `// -----`), dumps and timing reports to `diag`. With splitInputFile a
/// failing chunk does not stop the others; all errors come back joined, and
/// line numbers in them are those of the whole buffer.
llvm::Error runOpt(llvm::StringRef text, llvm::StringRef bufferName,
                   const OptOptions &options, llvm::raw_ostream &out,
                   llvm::raw_ostream &diag);

} // namespace zinc::passes

#endif
