//===- zinc-opt.cpp - Runs passes over a graph in the IR text form --------===//
#include "zinc/passes/OptDriver.h"
#include "zinc/passes/PassManagerOptions.h"
#include "zinc/support/Error.h"
#include "zinc/support/OutputFile.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"

namespace cl = llvm::cl;
using namespace zinc;

static constexpr llvm::StringLiteral kTool = "zinc-opt";

static int toolMain(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  zinc::reportFileSizeLimitAsWriteErrors();
  cl::OptionCategory category("zinc-opt options");
  cl::opt<std::string> inputFile(cl::Positional, cl::init("-"),
                                 cl::desc("<input .zir, - for stdin>"),
                                 cl::cat(category));
  cl::opt<std::string> outputFile("o", cl::init("-"), cl::value_desc("file"),
                                  cl::desc("Output file (default: stdout)"),
                                  cl::cat(category));
  // cl::desc keeps a reference: the text must outlive the option.
  std::string passesHelp =
      "Comma-separated passes to run: " + passes::listPassArguments();
  cl::opt<std::string> pipeline("passes", cl::value_desc("pipeline"),
                                cl::desc(passesHelp), cl::cat(category));
  cl::opt<bool> noVerify("no-verify", cl::cat(category),
                         cl::desc("Do not verify the input or the graph "
                                  "after each pass"));
  cl::opt<bool> splitInputFile(
      "split-input-file", cl::cat(category),
      cl::desc("Treat each chunk between '// -----' lines as its own graph"));
  passes::registerPassManagerCLOptions(category);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv,
                              "zinc-opt: runs zinc passes over the IR text "
                              "form and prints the result\n");

  auto input = llvm::MemoryBuffer::getFileOrSTDIN(inputFile);
  if (!input) {
    printError(kTool, makeError("cannot read '" + inputFile +
                                "': " + input.getError().message()));
    return 1;
  }
  std::error_code ec;
  llvm::ToolOutputFile out(outputFile, ec, llvm::sys::fs::OF_None);
  if (ec) {
    printError(kTool,
               makeError("cannot write '" + outputFile + "': " + ec.message()));
    return 1;
  }

  passes::OptOptions options;
  options.pipeline = pipeline;
  options.verify = !noVerify;
  options.splitInputFile = splitInputFile;
  options.configure = passes::applyPassManagerCLOptions;
  std::string bufferName = inputFile == "-" ? "<stdin>" : inputFile.getValue();
  if (llvm::Error err = passes::runOpt((*input)->getBuffer(), bufferName,
                                       options, out.os(), llvm::errs())) {
    printError(kTool, std::move(err));
    return 1;
  }
  out.keep();
  return 0;
}

int main(int argc, char **argv) {
  // What the tool printed must have reached its standard output.
  return zinc::finishStandardOutput("zinc-opt", toolMain(argc, argv));
}
