//===- PassManagerOptions.cpp - --print-after-all, --time-passes, ... -----===//
#include "zinc/passes/PassManagerOptions.h"
#include <memory>

namespace zinc::passes {
namespace cl = llvm::cl;

namespace {
/// Constructed on registration rather than at static initialization, so
/// that libLLVM's options of the same names can be removed first.
struct Options {
  explicit Options(cl::OptionCategory &cat)
      : printAfterAll("print-after-all",
                      cl::desc("Print the graph after every pass"),
                      cl::cat(cat)),
        printAfter("print-after",
                   cl::desc("Print the graph after the passes named (by "
                            "their argument, e.g. dce)"),
                   cl::CommaSeparated, cl::value_desc("pass"), cl::cat(cat)),
        timePasses("time-passes",
                   cl::desc("Time each pass and print a report to stderr"),
                   cl::cat(cat)),
        printSearch("print-search",
                    cl::desc("Print each configuration the memory planner "
                             "lowers while it searches, and its predicted "
                             "step, to stderr"),
                    cl::cat(cat)) {}
  cl::opt<bool> printAfterAll;
  cl::list<std::string> printAfter;
  cl::opt<bool> timePasses;
  cl::opt<bool> printSearch;
};
} // namespace

static std::unique_ptr<Options> &options() {
  static std::unique_ptr<Options> opts;
  return opts;
}

void registerPassManagerCLOptions(cl::OptionCategory &category) {
  if (options())
    return;
  auto &registered = cl::getRegisteredOptions();
  for (const char *name : {"print-after-all", "print-after", "time-passes"}) {
    auto it = registered.find(name);
    if (it != registered.end())
      it->second->removeArgument();
  }
  options() = std::make_unique<Options>(category);
}

llvm::Error applyPassManagerCLOptions(PassManager &pm) {
  const Options *opts = options().get();
  if (!opts)
    return llvm::Error::success();
  pm.setPrintAfterAll(opts->printAfterAll);
  pm.setTimePasses(opts->timePasses);
  pm.setPrintSearch(opts->printSearch);
  return pm.setPrintAfter(std::vector<std::string>(opts->printAfter.begin(),
                                                   opts->printAfter.end()));
}

} // namespace zinc::passes
