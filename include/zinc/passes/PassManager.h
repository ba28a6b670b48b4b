//===- PassManager.h - Runs a pipeline of passes over a graph -------------===//
//
// Like MLIR's pass manager: a pipeline written as text ("dce,dce"), the
// verifier after every pass that changed the graph, IR dumps after chosen
// passes and a timing report. Dumps and the report go to a stream the tool
// chooses (stderr in zinc-opt), never straight to the terminal.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_PASSES_PASSMANAGER_H
#define ZINC_PASSES_PASSMANAGER_H

#include "zinc/passes/Pass.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Timer.h"
#include "llvm/Support/raw_ostream.h"
#include <memory>
#include <string>
#include <vector>

namespace zinc::passes {

/// Whether the verifier runs after each pass unless told otherwise: on in
/// debug builds (assertions enabled), off in release builds, where the
/// tools still verify their input.
#ifdef NDEBUG
inline constexpr bool kVerifyEachByDefault = false;
#else
inline constexpr bool kVerifyEachByDefault = true;
#endif

/// The arguments of every pass in Passes.def, in its order.
std::vector<llvm::StringRef> getPassArguments();
/// "dce, tile, ..." for error messages and --help.
std::string listPassArguments();
/// Creates the pass whose argument is `argument`; an error naming the valid
/// ones when there is none.
llvm::Expected<std::unique_ptr<Pass>> createPass(llvm::StringRef argument);
/// Runs the passes named, in order, on `g` (a pass driving others:
/// plan-memory's trials), with the instrumentation of the pass manager
/// running the caller (ctx.instrumentation) when there is one; the first
/// error stops it, named by its pass.
llvm::Error runPassesNamed(ir::Graph &g, PassContext &ctx,
                           llvm::ArrayRef<llvm::StringRef> names);

/// How a pass manager runs each pass: the verifier after a pass that
/// changed the graph, dumps after chosen passes, and one timer per pass
/// argument. The passes a pass runs itself (runPassesNamed) share it, so
/// the same options reach them; each timer sums every run of its pass, and
/// a pass's row leaves out the time of the passes it runs.
class PassInstrumentation {
public:
  /// Runs `pass` on `g`: its error, or the verifier's after it, names
  /// the pass.
  llvm::Error run(Pass &pass, ir::Graph &g, PassContext &ctx);
  /// Prints the timing report (when timing) and resets the timers.
  void printTimers();

  bool verifyEach = kVerifyEachByDefault;
  bool printAfterAll = false;
  llvm::StringSet<> printAfter;
  bool timePasses = false;
  /// plan-memory prints each configuration it lowers while it searches,
  /// and what the cost model predicts of it (--print-search).
  bool printSearch = false;
  llvm::raw_ostream *diagOS = &llvm::errs();
  /// Called after each pass that succeeded, before the verifier; its error
  /// stops the run as the pass's own would (a test's fault injection, a
  /// bisection tool). Empty by default.
  std::function<llvm::Error(const Pass &, ir::Graph &)> afterPass;

private:
  llvm::Timer *timerFor(const Pass &pass);
  template <typename Fn> auto timeExclusively(llvm::Timer *timer, Fn &&fn);

  std::unique_ptr<llvm::TimerGroup> group;
  llvm::StringMap<std::unique_ptr<llvm::Timer>> timers;
  /// The timers of the passes running, outermost first.
  std::vector<llvm::Timer *> running;
};

class PassManager {
public:
  explicit PassManager(PassContext &ctx) : ctx(ctx) {}

  /// Appends the passes of a comma-separated pipeline ("dce,dce"); an
  /// unknown name is an error that lists the valid ones. A pass that runs
  /// others may be followed by them in braces, as getPipeline writes it
  /// ("plan-memory{insert-transfers,spill,allocate}"); they must be the
  /// ones it runs.
  llvm::Error parsePipeline(llvm::StringRef pipeline);
  void addPass(std::unique_ptr<Pass> pass);
  /// Appends zinc-compile's pipeline: every pass of Passes.def, in its
  /// order, that is enabled for this pass manager's context.
  void addDefaultPipeline();
  /// The pipeline as text, in the form parsePipeline reads.
  std::string getPipeline() const;
  size_t size() const { return passes.size(); }

  /// Runs the verifier after every pass that reports a change.
  void setVerifyEach(bool enable) { instrumentation.verifyEach = enable; }
  bool getVerifyEach() const { return instrumentation.verifyEach; }
  /// Dumps the graph after every pass.
  void setPrintAfterAll(bool enable) { instrumentation.printAfterAll = enable; }
  /// Dumps the graph after the passes with these arguments; an unknown
  /// argument is an error that lists the valid ones.
  llvm::Error setPrintAfter(llvm::ArrayRef<std::string> arguments);
  /// Times each pass and prints the report once the pipeline has run.
  void setTimePasses(bool enable) { instrumentation.timePasses = enable; }
  void setPrintSearch(bool enable) { instrumentation.printSearch = enable; }
  bool getTimePasses() const { return instrumentation.timePasses; }
  /// Where dumps and the timing report go.
  void setDiagnosticStream(llvm::raw_ostream &os) { instrumentation.diagOS = &os; }

  /// Runs the pipeline in order. A pass's error, or a verifier failure
  /// after it, stops the pipeline and names the pass. A pass's dump is
  /// written before the verifier runs, so a broken graph can be inspected.
  llvm::Error run(ir::Graph &g);

private:
  PassContext &ctx;
  std::vector<std::unique_ptr<Pass>> passes;
  PassInstrumentation instrumentation;
};

} // namespace zinc::passes

#endif
