//===- PassManager.cpp - Runs passes, verifies, dumps and times them ------===//
#include "zinc/passes/PassManager.h"
#include "zinc/ir/Printer.h"
#include "zinc/ir/Verifier.h"
#include "zinc/support/Error.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Timer.h"

namespace zinc::passes {

/// Splits a pipeline at the commas outside braces.
static llvm::SmallVector<llvm::StringRef, 8> splitPipeline(llvm::StringRef pipeline) {
  llvm::SmallVector<llvm::StringRef, 8> parts;
  int depth = 0;
  size_t begin = 0;
  for (size_t i = 0; i < pipeline.size(); ++i) {
    char c = pipeline[i];
    depth += c == '{' ? 1 : c == '}' ? -1 : 0;
    if (c == ',' && depth == 0) {
      parts.push_back(pipeline.slice(begin, i));
      begin = i + 1;
    }
  }
  parts.push_back(pipeline.substr(begin));
  return parts;
}

/// "insert-transfers, spill" -> "insert-transfers,spill".
static std::string withoutSpaces(llvm::StringRef pipeline) {
  std::string text;
  for (char c : pipeline)
    if (!llvm::isSpace(c))
      text += c;
  return text;
}

llvm::Error PassManager::parsePipeline(llvm::StringRef pipeline) {
  if (pipeline.trim().empty())
    return llvm::Error::success();
  std::vector<std::unique_ptr<Pass>> parsed;
  for (llvm::StringRef entry : splitPipeline(pipeline)) {
    entry = entry.trim();
    auto [name, nested] = entry.split('{');
    name = name.trim();
    if (name.empty())
      return makeError("empty pass name in pipeline '" + pipeline + "'");
    auto pass = createPass(name);
    if (!pass)
      return pass.takeError();
    if (entry.contains('{')) {
      if (!nested.endswith("}"))
        return makeError("unbalanced braces after '" + name + "' in pipeline '" + pipeline + "'");
      std::string given = withoutSpaces(nested.drop_back());
      llvm::StringRef runs = (*pass)->getNestedPipeline();
      if (given != runs)
        return makeError("'" + name + "' runs " +
                         (runs.empty() ? llvm::Twine("no passes of its own")
                                       : "{" + runs + "}") +
                         ", not {" + given + "}");
    }
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
#define ZINC_NESTED_PASS(ARGUMENT, CREATE)
#include "zinc/passes/Passes.def"
}

std::string PassManager::getPipeline() const {
  std::string text;
  for (const auto &pass : passes) {
    text += (text.empty() ? "" : ",") + pass->getArgument().str();
    if (!pass->getNestedPipeline().empty())
      text += "{" + pass->getNestedPipeline().str() + "}";
  }
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
  instrumentation.printAfter.clear();
  for (const std::string &arg : arguments)
    instrumentation.printAfter.insert(arg);
  return llvm::Error::success();
}

namespace {
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

llvm::Timer *PassInstrumentation::timerFor(const Pass &pass) {
  if (!timePasses)
    return nullptr;
  if (!group)
    group = std::make_unique<llvm::TimerGroup>("zinc-passes",
                                               "zinc pass execution timing report");
  std::unique_ptr<llvm::Timer> &timer = timers[pass.getArgument()];
  if (!timer) {
    std::string description = (pass.getName() + " (" + pass.getArgument() + ")").str();
    if (!pass.getNestedPipeline().empty())
      description += ", besides the passes it runs";
    timer = std::make_unique<llvm::Timer>(pass.getArgument(), description, *group);
  }
  return timer.get();
}

template <typename Fn>
auto PassInstrumentation::timeExclusively(llvm::Timer *timer, Fn &&fn) {
  // A row is its own time: the enclosing pass's timer stops meanwhile.
  llvm::Timer *enclosing = running.empty() ? nullptr : running.back();
  if (timer && enclosing)
    enclosing->stopTimer();
  if (timer)
    running.push_back(timer);
  auto result = [&] {
    TimeScope scope(timer);
    return fn();
  }();
  if (timer)
    running.pop_back();
  if (timer && enclosing)
    enclosing->startTimer();
  return result;
}

llvm::Error PassInstrumentation::run(Pass &pass, ir::Graph &g, PassContext &ctx) {
  std::string context = ("pass '" + pass.getArgument() + "'").str();
  llvm::Expected<bool> changed =
      timeExclusively(timerFor(pass), [&] { return pass.run(g, ctx); });
  if (!changed)
    return addContext(changed.takeError(), context);
  if (afterPass)
    if (llvm::Error err = afterPass(pass, g))
      return addContext(std::move(err), context);
  if (printAfterAll || printAfter.count(pass.getArgument())) {
    *diagOS << "// -----// IR Dump After " << pass.getName() << " (" << pass.getArgument()
            << ") //----- //\n";
    ir::printGraph(g, *diagOS);
    *diagOS << "\n";
  }
  if (verifyEach && *changed) {
    llvm::Timer *verifierTimer = nullptr;
    if (timePasses) {
      std::unique_ptr<llvm::Timer> &timer = timers["verifier"];
      if (!timer)
        timer = std::make_unique<llvm::Timer>("verifier", "(V) verifier", *group);
      verifierTimer = timer.get();
    }
    if (llvm::Error err = timeExclusively(verifierTimer, [&] { return ir::verifyGraph(g); }))
      return addContext(std::move(err), "after " + context);
  }
  return llvm::Error::success();
}

void PassInstrumentation::printTimers() {
  if (group)
    group->print(*diagOS, /*ResetAfterPrint=*/true);
}

llvm::Error PassManager::run(ir::Graph &g) {
  // The passes this pipeline's passes run themselves see the same options.
  PassInstrumentation *outer = ctx.instrumentation;
  ctx.instrumentation = &instrumentation;
  llvm::Error err = llvm::Error::success();
  for (const auto &pass : passes)
    if ((err = instrumentation.run(*pass, g, ctx)))
      break;
  ctx.instrumentation = outer;
  instrumentation.printTimers();
  return err;
}

} // namespace zinc::passes
