//===- zinc-dump.cpp - Shows what a plan does -----------------------------===//
#include "zinc/plan/PlanDump.h"
#include "zinc/plan/PlanVerifier.h"
#include "zinc/support/Error.h"
#include "zinc/support/OutputFile.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"

using namespace llvm;

static cl::OptionCategory dumpCategory("zinc-dump options");
static cl::opt<std::string> planPath(cl::Positional, cl::Required, cl::desc("PLAN"),
                                     cl::cat(dumpCategory));
static cl::opt<std::string> outputFormat("format", cl::desc("text (default) or json"),
                                   cl::init("text"), cl::cat(dumpCategory));
static cl::opt<bool>
    verify("verify",
           cl::desc("check the plan's memory and synchronisation "
                    "(residency, overlap, events, reads of unwritten bytes, "
                    "write-backs) instead of showing it"),
           cl::cat(dumpCategory));

static int toolMain(int argc, char **argv) {
  InitLLVM init(argc, argv);
  zinc::reportFileSizeLimitAsWriteErrors();
  cl::HideUnrelatedOptions(dumpCategory);
  cl::ParseCommandLineOptions(argc, argv, "zinc-dump: show a zinc plan\n");
  if (outputFormat != "text" && outputFormat != "json") {
    zinc::printError("zinc-dump",
                     zinc::makeError("--format=" + outputFormat +
                                     " is not available (this zinc offers text and json; "
                                     "trace and svg need the simulate pass)"));
    return 1;
  }
  auto plan = zinc::plan::readPlanFile(planPath);
  if (!plan) {
    zinc::printError("zinc-dump", plan.takeError());
    return 1;
  }
  if (verify) {
    if (llvm::Error err = zinc::plan::verifyPlan(*plan)) {
      zinc::printError("zinc-dump", zinc::addContext(std::move(err), planPath));
      return 1;
    }
    outs() << "plan verified\n";
    return 0;
  }
  if (outputFormat == "json")
    outs() << llvm::formatv("{0:2}", zinc::plan::planToJson(*plan)) << "\n";
  else
    zinc::plan::dumpPlanText(*plan, outs());
  return 0;
}

int main(int argc, char **argv) {
  // What the tool printed must have reached its standard output.
  return zinc::finishStandardOutput("zinc-dump", toolMain(argc, argv));
}
