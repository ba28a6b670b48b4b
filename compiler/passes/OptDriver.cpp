//===- OptDriver.cpp - Parse, verify, run a pipeline, print ---------------===//
#include "zinc/passes/OptDriver.h"
#include "zinc/ir/Parser.h"
#include "zinc/ir/Printer.h"
#include "zinc/ir/Verifier.h"
#include "zinc/passes/PassManager.h"
#include "zinc/support/Error.h"

namespace zinc::passes {

/// Splits at lines reading `// -----`. Each chunk keeps one newline for
/// every line before it, so parse errors point at lines of the whole file.
static std::vector<std::string> splitChunks(llvm::StringRef text) {
  std::vector<std::string> chunks(1);
  unsigned lineNo = 0;
  while (!text.empty()) {
    auto [line, rest] = text.split('\n');
    bool hadNewline = text.size() > line.size();
    text = rest;
    ++lineNo;
    if (line.trim() == "// -----") {
      chunks.push_back(std::string(lineNo, '\n'));
      continue;
    }
    chunks.back() += line.str();
    if (hadNewline)
      chunks.back() += '\n';
  }
  return chunks;
}

static llvm::Error runOne(llvm::StringRef text, llvm::StringRef bufferName,
                          const OptOptions &options, llvm::raw_ostream &out,
                          llvm::raw_ostream &diag) {
  PassContext ctx;
  PassManager pm(ctx);
  if (llvm::Error err = pm.parsePipeline(options.pipeline))
    return err;
  pm.setVerifyEach(options.verify);
  pm.setDiagnosticStream(diag);
  if (options.configure)
    if (llvm::Error err = options.configure(pm))
      return err;

  auto g = ir::parseGraph(text, bufferName);
  if (!g)
    return g.takeError();
  if (options.verify)
    if (llvm::Error err = ir::verifyGraph(**g))
      return addContext(std::move(err), bufferName);
  if (llvm::Error err = pm.run(**g))
    return addContext(std::move(err), bufferName);
  ir::printGraph(**g, out);
  return llvm::Error::success();
}

llvm::Error runOpt(llvm::StringRef text, llvm::StringRef bufferName,
                   const OptOptions &options, llvm::raw_ostream &out,
                   llvm::raw_ostream &diag) {
  if (!options.splitInputFile)
    return runOne(text, bufferName, options, out, diag);
  // A bad pipeline is reported once, not once per chunk.
  {
    PassContext ctx;
    PassManager pm(ctx);
    if (llvm::Error err = pm.parsePipeline(options.pipeline))
      return err;
    if (options.configure)
      if (llvm::Error err = options.configure(pm))
        return err;
  }
  llvm::Error all = llvm::Error::success();
  bool first = true;
  for (const std::string &chunk : splitChunks(text)) {
    std::string result;
    llvm::raw_string_ostream chunkOut(result);
    if (llvm::Error err = runOne(chunk, bufferName, options, chunkOut, diag)) {
      all = llvm::joinErrors(std::move(all), std::move(err));
      continue;
    }
    if (!first)
      out << "// -----\n";
    first = false;
    out << chunkOut.str();
  }
  return all;
}

} // namespace zinc::passes
