//===- PassManager.cpp - Runs passes, verifies, dumps and times them ------===//
#include "zinc/passes/PassManager.h"
#include "zinc/ir/Printer.h"
#include "zinc/ir/Verifier.h"
#include "zinc/support/Error.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Timer.h"

namespace zinc::passes {

llvm::Error PassManager::parsePipeline(llvm::StringRef pipeline) {
  if (pipeline.trim().empty())
    return llvm::Error::success();
  llvm::SmallVector<llvm::StringRef, 8> names;
  pipeline.split(names, ',');
  std::vector<std::unique_ptr<Pass>> parsed;
  for (llvm::StringRef name : names) {
    name = name.trim();
    if (name.empty())
      return makeError("empty pass name in pipeline '" + pipeline + "'");
    auto pass = createPass(name);
    if (!pass)
      return pass.takeError();
    parsed.push_back(std::move(*pass));
  }
  // All or nothing: a pipeline with a typo adds no passes.
  for (auto &p : parsed)
    addPass(std::move(p));
  return llvm::Error::success();
}

void PassManager::addPass(std::unique_ptr<Pass> pass) {
  passes.push_back(std::move(pass));
}

void PassManager::addDefaultPipeline() {
#define ZINC_PASS(ARGUMENT, CREATE)                                            \
  if (std::unique_ptr<Pass> pass = CREATE(); pass->isEnabled(ctx))              \
    addPass(std::move(pass));
#include "zinc/passes/Passes.def"
}

std::string PassManager::getPipeline() const {
  std::string text;
  for (const auto &pass : passes)
    text += (text.empty() ? "" : ",") + pass->getArgument().str();
  return text;
}

llvm::Error PassManager::setPrintAfter(llvm::ArrayRef<std::string> arguments) {
  std::vector<llvm::StringRef> valid = getPassArguments();
  for (const std::string &arg : arguments)
    if (!llvm::is_contained(valid, arg))
      return makeError("unknown pass '" + arg +
                       "' to print after; valid "
                       "passes: " +
                       listPassArguments());
  printAfter.clear();
  for (const std::string &arg : arguments)
    printAfter.insert(arg);
  return llvm::Error::success();
}

bool PassManager::shouldPrintAfter(const Pass &p) const {
  return printAfterAll || printAfter.count(p.getArgument());
}

namespace {
/// Times each pass, and the verifier, when asked to; a no-op otherwise.
/// The group outlives its timers, and printing resets them, so the report
/// appears once, where the pass manager says.
class PassTimers {
public:
  explicit PassTimers(bool enabled) {
    if (enabled)
      group = std::make_unique<llvm::TimerGroup>(
          "zinc-passes", "zinc pass execution timing report");
  }
  llvm::Timer *add(llvm::StringRef name, llvm::StringRef description) {
    if (!group)
      return nullptr;
    timers.push_back(std::make_unique<llvm::Timer>(name, description, *group));
    return timers.back().get();
  }
  void print(llvm::raw_ostream &os) {
    if (group)
      group->print(os, /*ResetAfterPrint=*/true);
  }

private:
  std::unique_ptr<llvm::TimerGroup> group;
  std::vector<std::unique_ptr<llvm::Timer>> timers;
};

/// Starts a timer for one scope; tolerates a null timer.
class TimeScope {
public:
  explicit TimeScope(llvm::Timer *t) : t(t) {
    if (t)
      t->startTimer();
  }
  ~TimeScope() {
    if (t)
      t->stopTimer();
  }

private:
  llvm::Timer *t;
};
} // namespace

llvm::Error PassManager::run(ir::Graph &g) {
  // Declared before the timers' users so the group dies last.
  PassTimers timers(timePasses);
  llvm::Timer *verifierTimer = timers.add("verifier", "(V) verifier");
  auto runAll = [&]() -> llvm::Error {
    for (const auto &pass : passes) {
      std::string context = ("pass '" + pass->getArgument() + "'").str();
      llvm::Timer *timer = timers.add(
          pass->getArgument(),
          (pass->getName() + " (" + pass->getArgument() + ")").str());
      llvm::Expected<bool> changed = [&] {
        TimeScope scope(timer);
        return pass->run(g, ctx);
      }();
      if (!changed)
        return addContext(changed.takeError(), context);
      if (shouldPrintAfter(*pass)) {
        *diagOS << "// -----// IR Dump After " << pass->getName() << " ("
                << pass->getArgument() << ") //----- //\n";
        ir::printGraph(g, *diagOS);
        *diagOS << "\n";
      }
      if (verifyEach && *changed) {
        TimeScope scope(verifierTimer);
        if (llvm::Error err = ir::verifyGraph(g))
          return addContext(std::move(err), "after " + context);
      }
    }
    return llvm::Error::success();
  };
  llvm::Error err = runAll();
  timers.print(*diagOS);
  return err;
}

} // namespace zinc::passes
