//===- SearchDriverTest.cpp - The memory planner's search and its errors --===//
//
// A chain of MatMul + Tanh layers with its weights and Adam's states on
// NVMe: how far ahead weights are prefetched changes what fits, so the
// search lowers several configurations. The pass instrumentation's
// afterPass hook stands in for a pass that fails inside one of them.
//
//===----------------------------------------------------------------------===//
#include "zinc/planning/SearchDriver.h"
#include "zinc/ir/Parser.h"
#include "zinc/ir/Printer.h"
#include "zinc/planning/Lowering.h"
#include "zinc/planning/Placement.h"
#include "zinc/passes/DoesNotFit.h"
#include "zinc/passes/EmitPlan.h"
#include "zinc/passes/SimulationProgram.h"
#include "zinc/passes/PassManager.h"
#include "zinc/support/Error.h"
#include "zinc/support/Hardware.h"
#include "zinc/plan/PlanSimulator.h"
#include "gtest/gtest.h"
#include <map>

using namespace zinc;
using namespace zinc::passes;

namespace {

std::string chainText(int layers) {
  std::string text = "graph \"chain\" {\n  input %x : f32[8,64]\n";
  for (int i = 0; i < layers; ++i)
    text += "  param %w" + std::to_string(i) + " : f32[64,64] init \"w" +
            std::to_string(i) + "\"\n";
  std::string prev = "%x";
  for (int i = 0; i < layers; ++i) {
    std::string m = "%m" + std::to_string(i), a = "%a" + std::to_string(i);
    text += "  " + m + " : f32[8,64] = MatMul(" + prev + ", %w" +
            std::to_string(i) + ")\n";
    text += "  " + a + " : f32[8,64] = Tanh(" + m + ")\n";
    prev = a;
  }
  text += "  %loss : f32[] = ReduceMean(" + prev + ") {keepdims = 0 : int}\n";
  text += "  output %loss\n}\n";
  return text;
}

struct Planning {
  Hardware hw;
  PassContext ctx;
  std::unique_ptr<ir::Graph> graph;
  std::vector<std::string> notes;
  /// How many times each pass ran, trials included.
  std::map<std::string, int> runs;
  PassInstrumentation instrumentation;
};

/// The chain, trained with Adam, scheduled, ready for plan-memory: states
/// and weights on NVMe, prefetches timed on a V100 description, `gpu`
/// bytes of GPU memory.
std::unique_ptr<Planning> scheduledChain(uint64_t gpu) {
  auto p = std::make_unique<Planning>();
  auto hw = loadHardware("dgx2-v100");
  if (!hw) {
    ADD_FAILURE() << llvm::toString(hw.takeError());
    return nullptr;
  }
  p->hw = *hw;
  auto g = ir::parseGraph(chainText(12), "chain.zir");
  if (!g) {
    ADD_FAILURE() << llvm::toString(g.takeError());
    return nullptr;
  }
  p->graph = std::move(*g);
  PassContext &ctx = p->ctx;
  ctx.training.optimizer = OptimizerKind::Adam;
  ctx.hardware = &p->hw;
  ctx.memory.tileMode = TileMode::None;
  ctx.memory.checkpointMode = CheckpointMode::None;
  ctx.memory.gpuCapacity = gpu;
  ctx.memory.cpuCapacity = p->hw.cpuMem;
  ctx.memory.nvmeCapacity = uint64_t(1) << 40;
  ctx.memory.optimizerOffload = OffloadPolicy::Nvme;
  ctx.memory.paramsOffload = OffloadPolicy::Nvme;
  ctx.memory.searchPrefetchLead = true;
  PassManager pm(ctx);
  if (llvm::Error err = pm.parsePipeline("build-training,dce,schedule")) {
    ADD_FAILURE() << llvm::toString(std::move(err));
    return nullptr;
  }
  if (llvm::Error err = pm.run(*p->graph)) {
    ADD_FAILURE() << llvm::toString(std::move(err));
    return nullptr;
  }
  ctx.note = [raw = p.get()](const llvm::Twine &msg) {
    raw->notes.push_back(msg.str());
  };
  p->instrumentation.verifyEach = true;
  p->instrumentation.afterPass = [raw = p.get()](const Pass &pass,
                                                 ir::Graph &) {
    ++raw->runs[pass.getArgument().str()];
    return llvm::Error::success();
  };
  ctx.instrumentation = &p->instrumentation;
  return p;
}

std::string printed(const ir::Graph &g) {
  std::string text;
  llvm::raw_string_ostream os(text);
  ir::printGraph(g, os);
  return os.str();
}

TEST(SearchDriver, KeepsAPlanThatFitsAndSaysHowItIsTimed) {
  auto p = scheduledChain(256 << 10);
  ASSERT_TRUE(p);
  ASSERT_FALSE(planning::planMemory(*p->graph, p->ctx));
  ASSERT_TRUE(p->ctx.layout);
  EXPECT_LE(p->ctx.layout->peak[static_cast<unsigned>(ir::Tier::Gpu)],
            256u << 10);
  EXPECT_EQ(p->ctx.memory.optimizerTier, ir::Tier::Nvme);
  EXPECT_GT(p->ctx.memory.prefetchLead, 0) << "the lead the simulation chose";
  ASSERT_EQ(p->notes.size(), 1u);
  EXPECT_NE(p->notes[0].find("each transfer's time ahead"), std::string::npos)
      << p->notes[0];
  EXPECT_GT(p->runs["allocate"], 1) << "several configurations were lowered";
  EXPECT_EQ(p->runs["insert-transfers"], p->runs["spill"]);
}

TEST(SearchDriver, ATrialThatFailsOtherwiseStopsTheSearchWithItsDiagnostic) {
  auto p = scheduledChain(256 << 10);
  ASSERT_TRUE(p);
  // The second configuration's spill fails as a bug in a pass would.
  int spills = 0;
  p->instrumentation.afterPass = [&](const Pass &pass,
                                     ir::Graph &) -> llvm::Error {
    if (pass.getArgument() == "spill" && ++spills == 2)
      return makeError("node 'm3' (MatMul): spill lost a copy");
    return llvm::Error::success();
  };
  llvm::Error err = planning::planMemory(*p->graph, p->ctx);
  ASSERT_TRUE(bool(err));
  EXPECT_FALSE(err.isA<DoesNotFit>());
  EXPECT_EQ(llvm::toString(std::move(err)),
            "pass 'spill': node 'm3' (MatMul): spill lost a copy");
  EXPECT_EQ(spills, 2) << "no configuration is lowered after the failure";
}

TEST(SearchDriver, AConfigurationThatDoesNotFitIsSkipped) {
  auto p = scheduledChain(256 << 10);
  ASSERT_TRUE(p);
  // Every configuration but the first overflows the GPU (the graph
  // allocate sees tells them apart): the first is the plan, however much
  // faster the others would have been.
  llvm::Optional<std::string> firstLowered;
  p->instrumentation.afterPass = [&](const Pass &pass,
                                     ir::Graph &g) -> llvm::Error {
    if (pass.getArgument() != "allocate")
      return llvm::Error::success();
    std::string lowered = printed(g);
    if (!firstLowered)
      firstLowered = lowered;
    if (lowered != *firstLowered)
      return llvm::make_error<DoesNotFit>(ir::Tier::Gpu, 2, "too big");
    return llvm::Error::success();
  };
  ASSERT_FALSE(planning::planMemory(*p->graph, p->ctx));
  EXPECT_EQ(p->ctx.memory.prefetchLead, 1) << "the first lead tried";
  EXPECT_TRUE(p->ctx.memory.prefetchCountsQueue) << "the first family tried";
  EXPECT_FALSE(p->ctx.memory.nvmeFetchesFirst) << "the first queue order tried";
}

TEST(SearchDriver, NothingFitsNamesACapacityThatDoes) {
  auto p = scheduledChain(16 << 10);
  ASSERT_TRUE(p);
  llvm::Error err = planning::planMemory(*p->graph, p->ctx);
  ASSERT_TRUE(err.isA<DoesNotFit>());
  uint64_t suggested = 0;
  llvm::handleAllErrors(std::move(err), [&](const DoesNotFit &e) {
    EXPECT_EQ(e.tier, ir::Tier::Gpu);
    std::string message = e.message;
    size_t at = message.find("--gpu-mem=");
    ASSERT_NE(at, std::string::npos) << message;
    suggested = std::stoull(message.substr(at + 10));
  });
  auto again = scheduledChain(suggested);
  ASSERT_TRUE(again);
  EXPECT_FALSE(planning::planMemory(*again->graph, again->ctx))
      << "the capacity named fits: " << suggested;
}

// The search holds one lowered graph at a time and lowers the best
// configuration again when it is kept: that is only right if lowering one
// configuration twice makes the same plan.
/// Weights and states on NVMe, prefetched at lead 2 with the link's queue;
/// `p`'s graph gets the homes.
planning::PlanConfig placeAtLeadTwo(Planning &p) {
  planning::PlanConfig config;
  config.optimizerTier = config.paramsTier = ir::Tier::Nvme;
  config.prefetchLead = 2;
  config.prefetchCountsQueue = true;
  MemoryOptions mem = p.ctx.memory;
  config.applyTo(mem);
  auto placed = planning::applyPlacement(*p.graph, mem);
  EXPECT_TRUE(bool(placed)) << llvm::toString(placed.takeError());
  return config;
}

TEST(SearchDriver, LoweringAConfigurationTwiceMakesTheSamePlan) {
  auto p = scheduledChain(256 << 10);
  ASSERT_TRUE(p);
  planning::PlanConfig config = placeAtLeadTwo(*p);
  auto first = planning::lowerCandidate(*p->graph, config, p->ctx);
  ASSERT_TRUE(bool(first)) << llvm::toString(first.takeError());
  auto second = planning::lowerCandidate(*p->graph, config, p->ctx);
  ASSERT_TRUE(bool(second)) << llvm::toString(second.takeError());
  ASSERT_TRUE(first->hasValue() && second->hasValue()) << "the chain fits";
  const planning::Candidate &a = **first, &b = **second;
  EXPECT_EQ(printed(*a.graph), printed(*b.graph));
  // The same offset for every value (the clones keep the value ids).
  ASSERT_EQ(a.graph->values().size(), b.graph->values().size());
  for (size_t i = 0; i < a.graph->values().size(); ++i)
    EXPECT_EQ(a.layout->offsets.lookup(a.graph->values()[i].get()),
              b.layout->offsets.lookup(b.graph->values()[i].get()))
        << a.graph->values()[i]->name;
  for (unsigned t = 0; t < 3; ++t)
    EXPECT_EQ(a.layout->peak[t], b.layout->peak[t]);
  EXPECT_EQ(a.predicted.stepSeconds, b.predicted.stepSeconds);
  EXPECT_GT(a.graph->numNodes(), p->graph->numNodes())
      << "the copies were made on a copy of the graph, not on it";
}

/// Every fact the simulation reads of `a` and `b`, instruction by
/// instruction.
void expectSameFacts(const plan::SimProgram &a, const plan::SimProgram &b) {
  EXPECT_EQ(a.ranks, b.ranks);
  EXPECT_EQ(a.gradAccum, b.gradAccum);
  EXPECT_EQ(a.numEvents, b.numEvents);
  ASSERT_EQ(a.instructions.size(), b.instructions.size());
  for (size_t i = 0; i < a.instructions.size(); ++i) {
    const plan::SimInstruction &x = a.instructions[i], &y = b.instructions[i];
    SCOPED_TRACE("instruction " + std::to_string(i) + " '" + x.name.str() + "'");
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.op, y.op);
    EXPECT_EQ(x.stream, y.stream);
    EXPECT_EQ(x.kind, y.kind);
    EXPECT_EQ(x.updateOnly, y.updateOnly);
    EXPECT_EQ(x.half, y.half);
    EXPECT_EQ(x.matrixProduct, y.matrixProduct);
    EXPECT_EQ(x.recompute, y.recompute);
    EXPECT_EQ(x.bytes, y.bytes);
    EXPECT_EQ(x.flops, y.flops);
    EXPECT_EQ(x.updatedElements, y.updatedElements);
    EXPECT_EQ(x.largestOperand, y.largestOperand);
    EXPECT_EQ(x.readsTier, y.readsTier);
    EXPECT_EQ(x.directNvme, y.directNvme);
    EXPECT_EQ(x.fillsHost, y.fillsHost);
    if (x.directNvme && y.directNvme) {
      const plan::NvmeSides &p = a.nvmeSides[x.sides], &q = b.nvmeSides[y.sides];
      for (auto [u, v] : {std::pair{&p.tierSide, &q.tierSide},
                          std::pair{&p.hostSide, &q.hostSide}}) {
        EXPECT_EQ(u->tier, v->tier);
        EXPECT_EQ(u->offset, v->offset);
        EXPECT_EQ(u->size, v->size);
      }
    }
    EXPECT_EQ(a.waitsOf(x).vec(), b.waitsOf(y).vec());
    EXPECT_EQ(a.signalsOf(x).vec(), b.signalsOf(y).vec());
  }
}

TEST(SearchDriver, TheSearchReadsFromTheGraphWhatThePlanWillSay) {
  for (int64_t accum : {1, 3}) {
    SCOPED_TRACE("--grad-accum=" + std::to_string(accum));
    auto p = scheduledChain(256 << 10);
    ASSERT_TRUE(p);
    p->ctx.training.gradAccum = accum;
    planning::PlanConfig config = placeAtLeadTwo(*p);
    auto lowered = planning::lowerCandidate(*p->graph, config, p->ctx);
    ASSERT_TRUE(bool(lowered)) << llvm::toString(lowered.takeError());
    ASSERT_TRUE(lowered->hasValue()) << "the chain fits";
    const planning::Candidate &c = **lowered;

    EmitOptions opts;
    opts.mode = "train";
    opts.layout = c.layout.get();
    opts.gradAccum = static_cast<unsigned>(accum);
    auto emitted = emitPlan(*c.graph, opts);
    ASSERT_TRUE(bool(emitted)) << llvm::toString(emitted.takeError());
    auto fromPlan = plan::simProgramOfPlan(*emitted);
    ASSERT_TRUE(bool(fromPlan)) << llvm::toString(fromPlan.takeError());
    plan::SimProgram fromGraph =
        simulationProgramOf(*c.graph, *c.layout, static_cast<unsigned>(accum));
    expectSameFacts(fromGraph, *fromPlan);
    // What the test covers: copies the lane submits directly and events.
    EXPECT_TRUE(llvm::any_of(fromGraph.instructions, [](const auto &i) {
      return i.directNvme && i.readsTier;
    }));
    EXPECT_TRUE(llvm::any_of(fromGraph.instructions, [](const auto &i) {
      return i.directNvme && !i.readsTier;
    }));
    EXPECT_GT(fromGraph.numEvents, 0u);
    EXPECT_EQ(accum > 1, llvm::any_of(fromGraph.instructions,
                                      [](const auto &i) { return i.updateOnly; }));

    auto predicted = plan::simulatePlan(*emitted, p->hw);
    ASSERT_TRUE(bool(predicted)) << llvm::toString(predicted.takeError());
    EXPECT_EQ(c.predicted.stepSeconds, predicted->stepSeconds);
  }
}

TEST(SearchDriver, AddContextKeepsDoesNotFitsType) {
  llvm::Error err = addContext(
      llvm::make_error<DoesNotFit>(ir::Tier::Cpu, 2, "needs 2"), "model.onnx");
  ASSERT_TRUE(err.isA<DoesNotFit>());
  EXPECT_FALSE(lessGpuMayFit(err)) << "a CPU overflow is not the GPU's";
  EXPECT_EQ(llvm::toString(std::move(err)), "model.onnx: needs 2");
  llvm::Error gpu = llvm::make_error<DoesNotFit>(ir::Tier::Gpu, 2, "needs 2");
  EXPECT_TRUE(lessGpuMayFit(gpu));
  EXPECT_EQ(llvm::toString(std::move(gpu)), "needs 2");
  auto marked = std::make_unique<DoesNotFit>(ir::Tier::Nvme, 2, "needs 2");
  marked->lessGpuMayFit = true;
  llvm::Error retry(std::move(marked));
  EXPECT_TRUE(lessGpuMayFit(retry))
      << "the planner saw the GPU overflow elsewhere";
  llvm::consumeError(std::move(retry));
  EXPECT_FALSE(
      unlessDoesNotFit(llvm::make_error<DoesNotFit>(ir::Tier::Gpu, 2, "")));
  llvm::Error other = unlessDoesNotFit(makeError("a bug"));
  EXPECT_EQ(llvm::toString(std::move(other)), "a bug");
}

} // namespace
