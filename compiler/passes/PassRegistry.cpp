//===- PassRegistry.cpp - Pass lookup by argument, from Passes.def --------===//
#include "zinc/passes/PassManager.h"
#include "zinc/support/Error.h"
#include "llvm/ADT/StringExtras.h"

namespace zinc::passes {

Pass::~Pass() = default;

std::vector<llvm::StringRef> getPassArguments() {
  return {
#define ZINC_PASS(ARGUMENT, CREATE) ARGUMENT,
#include "zinc/passes/Passes.def"
  };
}

std::string listPassArguments() { return llvm::join(getPassArguments(), ", "); }

llvm::Expected<std::unique_ptr<Pass>> createPass(llvm::StringRef argument) {
#define ZINC_PASS(ARGUMENT, CREATE)                                            \
  if (argument == ARGUMENT)                                                    \
    return CREATE();
#include "zinc/passes/Passes.def"
  return makeError("unknown pass '" + argument +
                   "'; valid passes: " + listPassArguments());
}

llvm::Error runPassesNamed(ir::Graph &g, PassContext &ctx,
                           llvm::ArrayRef<llvm::StringRef> names) {
  PassInstrumentation plain;
  plain.verifyEach = false;
  PassInstrumentation &instrumentation = ctx.instrumentation ? *ctx.instrumentation : plain;
  for (llvm::StringRef name : names) {
    auto pass = createPass(name);
    if (!pass)
      return pass.takeError();
    if (llvm::Error err = instrumentation.run(**pass, g, ctx))
      return err;
  }
  return llvm::Error::success();
}

} // namespace zinc::passes
