//===- PassManagerOptions.h - Command-line options of the pass manager ----===//
//
// --print-after-all, --print-after=NAME[,NAME], --time-passes and
// --print-search, shared by every tool that runs passes. libLLVM registers options with these names
// for its own pass manager; registering zinc's replaces them.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_PASSES_PASSMANAGEROPTIONS_H
#define ZINC_PASSES_PASSMANAGEROPTIONS_H

#include "zinc/passes/PassManager.h"
#include "llvm/Support/CommandLine.h"

namespace zinc::passes {

/// Registers the options in `category`; call once, before parsing the
/// command line.
void registerPassManagerCLOptions(llvm::cl::OptionCategory &category);
/// Applies the parsed options to `pm`; an error for an unknown pass name.
llvm::Error applyPassManagerCLOptions(PassManager &pm);

} // namespace zinc::passes

#endif
