//===- ZeroAccountingTest.cpp - model_states_bytes against ZeRO's formulas -===//
//
// The compile report's per-rank model states, summed from the partitioned
// graph's own values, against the ZeRO paper's accounting for mixed
// precision with Adam (Ψ parameters, N ranks):
//   stage 1: 4Ψ + 12Ψ/N    stage 2: 2Ψ + 14Ψ/N    stage 3: 16Ψ/N
// exactly, with each tensor's 1/N rounded up to its padded shard.
//
//===----------------------------------------------------------------------===//
#include "zinc/ir/Parser.h"
#include "zinc/passes/CompileReport.h"
#include "zinc/passes/EmitPlan.h"
#include "zinc/passes/PassManager.h"
#include "gtest/gtest.h"

using namespace zinc;

namespace {

/// Three weights, one of an odd size (its shards are padded).
const char *kModel = R"(graph "mlp" {
  input %x : f32[4,64]
  input %t : f32[4,7]
  param %w : f32[64,33] init "w"
  param %b : f32[33] init "b"
  param %v : f32[33,7] init "v"
  %h : f32[4,33] = MatMul(%x, %w) name "fc1"
  %hb : f32[4,33] = Add(%h, %b) name "bias"
  %y : f32[4,7] = MatMul(%hb, %v) name "fc2"
  %d : f32[4,7] = Sub(%y, %t) name "diff"
  %sq : f32[4,7] = Mul(%d, %d) name "square"
  %loss : f32[] = ReduceMean(%sq) name "mean" {keepdims = 0 : int}
  output %loss
})";

const int64_t kSizes[] = {64 * 33, 33, 33 * 7};

int64_t psi() {
  int64_t n = 0;
  for (int64_t s : kSizes)
    n += s;
  return n;
}

/// Σ ceil(n_i / N): one rank's padded share of every weight.
int64_t shardSum(unsigned ranks) {
  int64_t n = 0;
  for (int64_t s : kSizes)
    n += (s + ranks - 1) / ranks;
  return n;
}

struct ModelStates {
  int64_t params = 0, grads = 0, optimizer = 0, total = 0;
};

ModelStates compileAndReport(unsigned ranks, unsigned stage) {
  auto g = ir::parseGraph(kModel, "mlp.zir");
  if (!g) {
    ADD_FAILURE() << llvm::toString(g.takeError());
    return {};
  }
  passes::PassContext ctx;
  ctx.training.precision = PrecisionKind::FP16;
  ctx.training.lossScale = LossScaleKind::Dynamic;
  ctx.zero.ranks = ranks;
  ctx.zero.stage = stage;
  passes::PassManager pm(ctx);
  pm.setVerifyEach(true);
  pm.addDefaultPipeline();
  if (auto err = pm.run(**g)) {
    ADD_FAILURE() << llvm::toString(std::move(err));
    return {};
  }
  EmitOptions emit;
  emit.mode = "train";
  emit.zeroStage = stage;
  emit.loss = (*g)->lookupValue("loss");
  auto plan = emitPlan(**g, emit);
  if (!plan) {
    ADD_FAILURE() << llvm::toString(plan.takeError());
    return {};
  }
  CompileConfig config;
  config.mode = "train";
  config.ranks = ranks;
  config.zeroStage = stage;
  config.precision = "fp16";
  Hardware hw;
  llvm::json::Value report = buildCompileReport(**g, *plan, config, hw);
  const llvm::json::Object *states =
      report.getAsObject()->getObject("per_rank")->getObject("model_states_bytes");
  // Byte counts are unsigned in the report.
  auto bytes = [&](llvm::StringRef key) -> int64_t {
    const llvm::json::Value *v = states->get(key);
    llvm::Optional<uint64_t> n = v ? v->getAsUINT64() : llvm::None;
    EXPECT_TRUE(n.hasValue()) << key.str();
    return n ? static_cast<int64_t>(*n) : -1;
  };
  ModelStates m;
  m.params = bytes("params");
  m.grads = bytes("grads");
  m.optimizer = bytes("optimizer");
  m.total = bytes("total");
  const llvm::json::Object *model = report.getAsObject()->getObject("model");
  EXPECT_EQ(*model->getInteger("params"), psi());
  EXPECT_EQ(*model->getInteger("trainable_params"), psi());
  return m;
}

class ZeroAccounting : public ::testing::TestWithParam<unsigned> {};

TEST_P(ZeroAccounting, Stage1ShardsMastersAndStates) {
  unsigned n = GetParam();
  ModelStates m = compileAndReport(n, 1);
  EXPECT_EQ(m.params, 2 * psi());
  EXPECT_EQ(m.grads, 2 * psi());
  EXPECT_EQ(m.optimizer, 12 * shardSum(n)); // fp32 master, m and v
  EXPECT_EQ(m.total, m.params + m.grads + m.optimizer);
  // 4Ψ + 12Ψ/N, up to the padding of the shards.
  EXPECT_NEAR(m.total, 4.0 * psi() + 12.0 * psi() / n, 12.0 * std::size(kSizes));
}

TEST_P(ZeroAccounting, Stage2ShardsGradientsToo) {
  unsigned n = GetParam();
  ModelStates m = compileAndReport(n, 2);
  EXPECT_EQ(m.params, 2 * psi());
  EXPECT_EQ(m.grads, 2 * shardSum(n));
  EXPECT_EQ(m.optimizer, 12 * shardSum(n));
  EXPECT_NEAR(m.total, 2.0 * psi() + 14.0 * psi() / n, 14.0 * std::size(kSizes));
}

TEST_P(ZeroAccounting, Stage3ShardsEverything) {
  unsigned n = GetParam();
  ModelStates m = compileAndReport(n, 3);
  EXPECT_EQ(m.params, 2 * shardSum(n));
  EXPECT_EQ(m.grads, 2 * shardSum(n));
  EXPECT_EQ(m.optimizer, 12 * shardSum(n));
  EXPECT_NEAR(m.total, 16.0 * psi() / n, 16.0 * std::size(kSizes));
}

INSTANTIATE_TEST_SUITE_P(Ranks, ZeroAccounting, ::testing::Values(2u, 3u, 8u, 64u));

TEST(ZeroAccounting, OneRankHoldsEverything) {
  // Stage 0 (and any stage on one rank): 16Ψ.
  ModelStates m = compileAndReport(1, 3);
  EXPECT_EQ(m.total, 16 * psi());
  m = compileAndReport(4, 0);
  EXPECT_EQ(m.total, 16 * psi());
}

} // namespace
