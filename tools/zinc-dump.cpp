//===- zinc-dump.cpp - Shows what a plan does -----------------------------===//
#include "zinc/plan/PlanDump.h"
#include "zinc/plan/PlanPaths.h"
#include "zinc/plan/PlanPicture.h"
#include "zinc/plan/PlanSimulator.h"
#include "zinc/plan/PlanTimeline.h"
#include "zinc/plan/PlanVerifier.h"
#include "zinc/support/Error.h"
#include "zinc/support/OutputFile.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"

using namespace llvm;

static cl::OptionCategory dumpCategory("zinc-dump options");
static cl::opt<std::string> planPath(cl::Positional, cl::Required,
                                     cl::desc("PLAN"), cl::cat(dumpCategory));
static cl::opt<std::string> outputFormat(
    "format",
    cl::desc("text (default), json, trace (the predicted timeline as "
             "Chrome trace JSON) or svg (memory per tier over the step "
             "and the stream timeline, as a picture)"),
    cl::init("text"), cl::cat(dumpCategory));
static cl::opt<std::string> costModel(
    "cost-model",
    cl::desc("what prices the trace: hardware (default: the rates of the "
             "--hw the plan was compiled for) or instructions (one "
             "microsecond each, a deterministic timeline for tests)"),
    cl::init("hardware"), cl::cat(dumpCategory));
static cl::opt<bool>
    verify("verify",
           cl::desc("check the plan's memory and synchronisation "
                    "(residency, overlap, events, reads of unwritten bytes, "
                    "write-backs) and that every file it names for zinc-run "
                    "to read is inside the model's directory, instead of "
                    "showing it"),
           cl::cat(dumpCategory));

static int toolMain(int argc, char **argv) {
  InitLLVM init(argc, argv);
  zinc::reportFileSizeLimitAsWriteErrors();
  cl::HideUnrelatedOptions(dumpCategory);
  cl::ParseCommandLineOptions(argc, argv, "zinc-dump: show a zinc plan\n");
  if (outputFormat != "text" && outputFormat != "json" &&
      outputFormat != "trace" && outputFormat != "svg") {
    zinc::printError(
        "zinc-dump",
        zinc::makeError("--format must be text, json, trace or svg, not '" +
                        outputFormat + "'"));
    return 1;
  }
  if (costModel != "hardware" && costModel != "instructions") {
    zinc::printError("zinc-dump",
                     zinc::makeError("--cost-model must be hardware or "
                                     "instructions, not '" +
                                     costModel + "'"));
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
    if (llvm::Error err = zinc::plan::verifyPlanPaths(*plan)) {
      zinc::printError("zinc-dump", zinc::addContext(std::move(err), planPath));
      return 1;
    }
    outs() << "plan verified\n";
    return 0;
  }
  if (outputFormat == "trace" || outputFormat == "svg") {
    zinc::plan::CostModel model = costModel == "instructions"
                                      ? zinc::plan::CostModel::InstructionCount
                                      : zinc::plan::CostModel::Hardware;
    zinc::Hardware hw;
    if (model == zinc::plan::CostModel::Hardware) {
      auto described = zinc::plan::planHardware(*plan);
      if (!described) {
        zinc::printError("zinc-dump",
                         zinc::addContext(described.takeError(), planPath));
        return 1;
      }
      hw = *described;
    }
    auto prediction = zinc::plan::simulatePlan(*plan, hw, model);
    if (!prediction) {
      zinc::printError("zinc-dump",
                       zinc::addContext(prediction.takeError(),
                                        planPath + ": corrupt plan"));
      return 1;
    }
    if (outputFormat == "svg")
      zinc::plan::writePlanSvg(*plan, *prediction, outs());
    else
      outs() << zinc::plan::predictedTrace(*plan, *prediction) << "\n";
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
