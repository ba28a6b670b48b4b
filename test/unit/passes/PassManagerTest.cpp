//===- PassManagerTest.cpp - Pipelines, verification, dumps and timing ----===//
#include "zinc/passes/PassManager.h"
#include "zinc/ir/Parser.h"
#include "zinc/passes/OptDriver.h"
#include "zinc/support/Error.h"
#include "gtest/gtest.h"

using namespace zinc;
using namespace zinc::passes;

namespace {

const char *kGraph = R"(graph "g" {
  input %x : f32[2]
  %a : f32[2] = Neg(%x) name "a"
  %b : f32[2] = Neg(%a) name "b"
  %dead : f32[2] = Abs(%x) name "dead"
  output %b
})";

std::unique_ptr<ir::Graph> parse(llvm::StringRef text) {
  auto g = ir::parseGraph(text, "t.zir");
  if (!g) {
    ADD_FAILURE() << llvm::toString(g.takeError());
    return nullptr;
  }
  return std::move(*g);
}

std::string message(llvm::Error err) {
  return err ? llvm::toString(std::move(err)) : "ok";
}

/// Erases the first node, leaving its users reading an undefined value; it
/// says whether it changed something as told, to test when the verifier runs.
class BreakingPass : public Pass {
public:
  explicit BreakingPass(bool reportChange) : reportChange(reportChange) {}
  llvm::StringRef getName() const override { return "Breaking Pass"; }
  llvm::StringRef getArgument() const override { return "break"; }
  llvm::Expected<bool> run(ir::Graph &g, PassContext &) override {
    g.eraseNode(g.firstNode());
    return reportChange;
  }

private:
  bool reportChange;
};

class NoOpPass : public Pass {
public:
  llvm::StringRef getName() const override { return "No-op"; }
  llvm::StringRef getArgument() const override { return "noop"; }
  llvm::Expected<bool> run(ir::Graph &, PassContext &) override {
    return false;
  }
};

class FailingPass : public Pass {
public:
  llvm::StringRef getName() const override { return "Failing Pass"; }
  llvm::StringRef getArgument() const override { return "fail"; }
  llvm::Expected<bool> run(ir::Graph &, PassContext &) override {
    return makeError("node 'a' (Neg): unsupported");
  }
};

TEST(PassManager, ParsesAPipeline) {
  PassContext ctx;
  PassManager pm(ctx);
  EXPECT_EQ(message(pm.parsePipeline("dce, dce")), "ok");
  EXPECT_EQ(pm.size(), 2u);
  EXPECT_EQ(message(pm.parsePipeline("")), "ok");
  EXPECT_EQ(pm.size(), 2u);
}

TEST(PassManager, UnknownPassListsTheValidOnes) {
  PassContext ctx;
  PassManager pm(ctx);
  EXPECT_EQ(message(pm.parsePipeline("dce,tile-everything")),
            "unknown pass 'tile-everything'; valid passes: fuse-gelu, fuse-silu, fuse-swiglu, fuse-rms-norm, fuse-rotary, fuse-attention, tile, build-training, "
            "inference-dropout, inference-form, mixed-precision, fold-transposes, sum-before-split, fuse-masked-softmax, fold-scale, fuse-bias, triangular-products, concat-in-place, dce, "
            "checkpoint, partition, accumulate-gradients, clip-grad-norm, schedule, "
            "plan-memory, insert-transfers, spill, allocate");
  EXPECT_EQ(pm.size(), 0u) << "a bad pipeline adds nothing";
  EXPECT_EQ(message(pm.parsePipeline("dce,,dce")),
            "empty pass name in pipeline 'dce,,dce'");
}

TEST(PassManager, RegistryComesFromPassesDef) {
  std::vector<llvm::StringRef> args = getPassArguments();
  ASSERT_FALSE(args.empty());
  EXPECT_TRUE(llvm::is_contained(args, "dce"));
  EXPECT_TRUE(llvm::is_contained(args, "build-training"));
  auto dce = createPass("dce");
  ASSERT_TRUE(bool(dce));
  EXPECT_EQ((*dce)->getArgument(), "dce");
  EXPECT_EQ((*dce)->getName(), "Dead Code Elimination");
}

TEST(PassManager, RunsPassesInOrder) {
  auto g = parse(kGraph);
  ASSERT_TRUE(g);
  PassContext ctx;
  PassManager pm(ctx);
  ASSERT_FALSE(pm.parsePipeline("dce"));
  EXPECT_EQ(message(pm.run(*g)), "ok");
  EXPECT_EQ(g->numNodes(), 2u);
  EXPECT_FALSE(g->lookupValue("dead"));
}

TEST(PassManager, VerifierFailureNamesThePass) {
  auto g = parse(kGraph);
  ASSERT_TRUE(g);
  PassContext ctx;
  PassManager pm(ctx);
  pm.setVerifyEach(true);
  ASSERT_FALSE(pm.parsePipeline("dce"));
  pm.addPass(std::make_unique<BreakingPass>(/*reportChange=*/true));
  ASSERT_FALSE(pm.parsePipeline("dce"));
  EXPECT_EQ(message(pm.run(*g)),
            "after pass 'break': verifier: node 'b' (Neg): input 0 '%a' is "
            "never defined");
}

TEST(PassManager, VerifierSkipsPassesThatChangedNothing) {
  auto g = parse(kGraph);
  ASSERT_TRUE(g);
  PassContext ctx;
  PassManager pm(ctx);
  pm.setVerifyEach(true);
  pm.addPass(std::make_unique<BreakingPass>(/*reportChange=*/false));
  EXPECT_EQ(message(pm.run(*g)), "ok");
}

TEST(PassManager, VerifyEachCanBeTurnedOff) {
  auto g = parse(kGraph);
  ASSERT_TRUE(g);
  PassContext ctx;
  PassManager pm(ctx);
  pm.setVerifyEach(false);
  pm.addPass(std::make_unique<BreakingPass>(/*reportChange=*/true));
  EXPECT_EQ(message(pm.run(*g)), "ok");
}

TEST(PassManager, VerifyEachDefaultsOnWithAssertions) {
  PassContext ctx;
  PassManager pm(ctx);
  EXPECT_EQ(pm.getVerifyEach(), kVerifyEachByDefault);
#ifndef NDEBUG
  EXPECT_TRUE(pm.getVerifyEach());
#endif
}

TEST(PassManager, PassErrorNamesThePassAndStops) {
  auto g = parse(kGraph);
  ASSERT_TRUE(g);
  PassContext ctx;
  PassManager pm(ctx);
  pm.addPass(std::make_unique<FailingPass>());
  ASSERT_FALSE(pm.parsePipeline("dce"));
  EXPECT_EQ(message(pm.run(*g)), "pass 'fail': node 'a' (Neg): unsupported");
  EXPECT_TRUE(g->lookupValue("dead")) << "dce after the failure must not run";
}

TEST(PassManager, PrintAfterAllDumpsEachPass) {
  auto g = parse(kGraph);
  ASSERT_TRUE(g);
  PassContext ctx;
  PassManager pm(ctx);
  std::string dump;
  llvm::raw_string_ostream os(dump);
  pm.setDiagnosticStream(os);
  pm.setPrintAfterAll(true);
  ASSERT_FALSE(pm.parsePipeline("dce,dce"));
  ASSERT_FALSE(pm.run(*g));
  const char *once =
      R"(// -----// IR Dump After Dead Code Elimination (dce) //----- //
graph "g" opset 17 {
  input %x : f32[2]
  %a : f32[2] = Neg(%x) name "a"
  %b : f32[2] = Neg(%a) name "b"
  output %b
}

)";
  EXPECT_EQ(os.str(), std::string(once) + once);
}

TEST(PassManager, PrintAfterDumpsOnlyTheNamedPasses) {
  auto g = parse(kGraph);
  ASSERT_TRUE(g);
  PassContext ctx;
  PassManager pm(ctx);
  std::string dump;
  llvm::raw_string_ostream os(dump);
  pm.setDiagnosticStream(os);
  ASSERT_FALSE(pm.setPrintAfter({"dce"}));
  pm.addPass(std::make_unique<NoOpPass>());
  ASSERT_FALSE(pm.parsePipeline("dce"));
  ASSERT_FALSE(pm.run(*g));
  EXPECT_EQ(llvm::StringRef(os.str()).count("IR Dump After"), 1u);
  EXPECT_TRUE(llvm::StringRef(os.str()).startswith(
      "// -----// IR Dump After Dead Code Elimination (dce) //----- //\n"));
}

TEST(PassManager, PrintAfterRejectsUnknownPasses) {
  PassContext ctx;
  PassManager pm(ctx);
  EXPECT_EQ(message(pm.setPrintAfter({"dce", "nope"})),
            "unknown pass 'nope' to print after; valid passes: fuse-gelu, fuse-silu, fuse-swiglu, fuse-rms-norm, fuse-rotary, fuse-attention, tile, build-training, "
            "inference-dropout, inference-form, mixed-precision, fold-transposes, sum-before-split, fuse-masked-softmax, fold-scale, fuse-bias, triangular-products, concat-in-place, dce, "
            "checkpoint, partition, accumulate-gradients, clip-grad-norm, schedule, "
            "plan-memory, insert-transfers, spill, allocate");
}

TEST(PassManager, DumpComesBeforeTheVerifierFailure) {
  auto g = parse(kGraph);
  ASSERT_TRUE(g);
  PassContext ctx;
  PassManager pm(ctx);
  std::string dump;
  llvm::raw_string_ostream os(dump);
  pm.setDiagnosticStream(os);
  pm.setVerifyEach(true);
  pm.setPrintAfterAll(true);
  pm.addPass(std::make_unique<BreakingPass>(/*reportChange=*/true));
  EXPECT_NE(message(pm.run(*g)), "ok");
  EXPECT_NE(os.str().find("value %a : f32[2]"), std::string::npos) << os.str();
}

TEST(PassManager, TimePassesReportsEachPass) {
  auto g = parse(kGraph);
  ASSERT_TRUE(g);
  PassContext ctx;
  PassManager pm(ctx);
  std::string report;
  llvm::raw_string_ostream os(report);
  pm.setDiagnosticStream(os);
  pm.setTimePasses(true);
  ASSERT_FALSE(pm.parsePipeline("dce"));
  ASSERT_FALSE(pm.run(*g));
  EXPECT_NE(os.str().find("zinc pass execution timing report"),
            std::string::npos);
  EXPECT_NE(os.str().find("Dead Code Elimination (dce)"), std::string::npos);
}

TEST(OptDriver, SplitInputKeepsGoingAndKeepsLineNumbers) {
  OptOptions opts;
  opts.splitInputFile = true;
  opts.pipeline = "dce";
  std::string out, diag;
  llvm::raw_string_ostream outOS(out), diagOS(diag);
  llvm::Error err =
      runOpt("graph \"a\" {\n}\n// -----\ngraph \"b\" {\n"
             "  input %x : f3[1]\n}\n// -----\ngraph \"c\" {\n}\n",
             "in.zir", opts, outOS, diagOS);
  EXPECT_EQ(message(std::move(err)), "in.zir:5:14: unknown element type 'f3'");
  EXPECT_EQ(outOS.str(), "graph \"a\" opset 17 {\n}\n// -----\n"
                         "graph \"c\" opset 17 {\n}\n");
}

TEST(OptDriver, VerifiesTheInput) {
  OptOptions opts;
  std::string out, diag;
  llvm::raw_string_ostream outOS(out), diagOS(diag);
  const char *bad = "graph \"g\" {\n  param %w : f32[1]\n}\n";
  EXPECT_EQ(message(runOpt(bad, "in.zir", opts, outOS, diagOS)),
            "in.zir: verifier: value '%w' has role param but no initializer");
  opts.verify = false;
  EXPECT_EQ(message(runOpt(bad, "in.zir", opts, outOS, diagOS)), "ok");
}

} // namespace

/// Runs dce itself, as plan-memory runs its trials' passes.
class RunsDcePass : public Pass {
public:
  llvm::StringRef getName() const override { return "Runs DCE"; }
  llvm::StringRef getArgument() const override { return "runs-dce"; }
  llvm::StringRef getNestedPipeline() const override { return "dce"; }
  llvm::Expected<bool> run(ir::Graph &g, PassContext &ctx) override {
    if (llvm::Error err = runPassesNamed(g, ctx, {"dce"}))
      return std::move(err);
    return true;
  }
};

TEST(PassManager, NestedRunsShareTheDumpsAndTheirErrorsNameTheirPass) {
  auto g = parse(kGraph);
  ASSERT_TRUE(g);
  PassContext ctx;
  PassManager pm(ctx);
  std::string dump;
  llvm::raw_string_ostream os(dump);
  pm.setDiagnosticStream(os);
  ASSERT_FALSE(pm.setPrintAfter({"dce"}));
  pm.addPass(std::make_unique<RunsDcePass>());
  ASSERT_FALSE(pm.run(*g));
  EXPECT_EQ(llvm::StringRef(os.str()).count("IR Dump After Dead Code Elimination (dce)"), 1u)
      << "--print-after reaches the passes a pass runs itself";
  EXPECT_EQ(ctx.instrumentation, nullptr) << "the pass manager's own, only while it runs";
  EXPECT_EQ(pm.getPipeline(), "runs-dce{dce}");
}

TEST(PassManager, NestedRunsAreTimedUnderTheirOwnPass) {
  auto g = parse(kGraph);
  ASSERT_TRUE(g);
  PassContext ctx;
  PassManager pm(ctx);
  std::string report;
  llvm::raw_string_ostream os(report);
  pm.setDiagnosticStream(os);
  pm.setTimePasses(true);
  pm.addPass(std::make_unique<RunsDcePass>());
  ASSERT_FALSE(pm.run(*g));
  EXPECT_NE(os.str().find("Dead Code Elimination (dce)"), std::string::npos) << os.str();
  EXPECT_NE(os.str().find("Runs DCE (runs-dce), besides the passes it runs"), std::string::npos)
      << os.str();
}

TEST(PassManager, ParsesThePipelineItPrints) {
  PassContext ctx;
  PassManager pm(ctx);
  EXPECT_EQ(message(pm.parsePipeline("dce, plan-memory{insert-transfers, spill, allocate}")),
            "ok");
  EXPECT_EQ(pm.getPipeline(), "dce,plan-memory{insert-transfers,spill,allocate}");
  EXPECT_EQ(message(pm.parsePipeline("plan-memory{spill,allocate}")),
            "'plan-memory' runs {insert-transfers,spill,allocate}, not {spill,allocate}");
  EXPECT_EQ(message(pm.parsePipeline("dce{dce}")), "'dce' runs no passes of its own, not {dce}");
  EXPECT_EQ(message(pm.parsePipeline("plan-memory{insert-transfers")),
            "unbalanced braces after 'plan-memory' in pipeline 'plan-memory{insert-transfers'");
  EXPECT_EQ(pm.size(), 2u) << "bad pipelines add nothing";
}
