//===- PlanSimulatorTest.cpp - The cost model and the step's simulation ---===//
#include "test/unit/plan/PlanBuilder.h"
#include "zinc/plan/PlanSimulator.h"
#include "zinc/plan/PlanTimeline.h"
#include "gtest/gtest.h"

using namespace zinc;
using namespace zinc::plan;
using zinc::plan::test::PlanBuilder;

namespace {

/// Round numbers, so expected costs can be written down by hand.
Hardware roundHardware() {
  Hardware hw;
  hw.name = "round";
  hw.gpusPerNode = 8;
  hw.gpuFlopsFp32 = 1e12;
  hw.gpuFlopsHalf = 8e12;
  hw.gpuMemBandwidth = 1e12;
  hw.kernelLaunchSeconds = 0;
  hw.hostToDeviceBandwidth = 1e9;
  hw.deviceToHostBandwidth = 2e9;
  hw.gpusPerHostLink = 2;
  hw.cpuMemBandwidth = 80e9;
  hw.cpuAdamParamsPerSecond = 8e9;
  hw.nvmeReadBandwidth = 8e9;
  hw.nvmeWriteBandwidth = 4e9;
  hw.intraNodeBandwidth = 100e9;
  hw.intraNodeLatency = 1e-6;
  hw.interNodeBandwidth = 10e9;
  hw.interNodeLatency = 10e-6;
  // A GPU's: transfers run beside compute on engines of their own.
  hw.copyEngines = true;
  return hw;
}

Prediction simulate(const Plan &plan, const Hardware &hw,
                    CostModel model = CostModel::Hardware) {
  auto p = simulatePlan(plan, hw, model);
  EXPECT_TRUE(static_cast<bool>(p)) << llvm::toString(p.takeError());
  return p ? *p : Prediction{};
}

TEST(HardwareShares, RanksOfANodeShareItsLinksAndDisks) {
  Hardware hw = roundHardware();
  EXPECT_EQ(hw.ranksPerNode(1), 1u);
  EXPECT_EQ(hw.ranksPerNode(64), 8u);
  // One rank has a host link to itself; two or more share it by pairs.
  EXPECT_DOUBLE_EQ(hw.h2dPerRank(1), 1e9);
  EXPECT_DOUBLE_EQ(hw.h2dPerRank(16), 0.5e9);
  EXPECT_DOUBLE_EQ(hw.d2hPerRank(16), 1e9);
  // NVMe and CPU memory are the node's, shared by all its ranks.
  EXPECT_DOUBLE_EQ(hw.nvmeReadPerRank(4), 2e9);
  EXPECT_DOUBLE_EQ(hw.nvmeWritePerRank(512), 0.5e9);
  EXPECT_DOUBLE_EQ(hw.cpuAdamPerRank(8), 1e9);
}

TEST(PlanSimulator, StreamsOverlapUntilAnEventOrdersThem) {
  // h2d fetches w while compute works on x; the product waits for w.
  PlanBuilder b;
  int x = b.tensor("x", TIER_GPU, 0, 1000);
  int y = b.tensor("y", TIER_GPU, 4096, 1000);
  int wHost = b.tensor("w.host", TIER_CPU, 0, 250000, ROLE_PARAMETER);
  int w = b.tensor("w", TIER_GPU, 8192, 250000);
  int z = b.tensor("z", TIER_GPU, 1 << 20, 1000);
  b.inst("relu", "Relu", STREAM_COMPUTE, {x}, {y}).set_flops(1000);
  b.inst("fetch", "zinc.Copy", STREAM_H2D, {wHost}, {w}, {}, {0});
  b.inst("mul", "Mul", STREAM_COMPUTE, {y, w}, {z}, {0}).set_flops(2e9);
  Hardware hw = roundHardware();

  // Counting instructions: relu [0,1), fetch [0,1), mul [1,2).
  Prediction count = simulate(b.p, hw, CostModel::InstructionCount);
  ASSERT_EQ(count.timeline.size(), 3u);
  EXPECT_DOUBLE_EQ(count.timeline[2].start, 1e-6);
  EXPECT_DOUBLE_EQ(count.stepSeconds, 2e-6);
  EXPECT_DOUBLE_EQ(count.lowerBoundSeconds, 2e-6);
  EXPECT_EQ(count.bottleneck, STREAM_COMPUTE);

  // On the machine: relu is bandwidth-bound (8 KB at 1 TB/s = 8 ns), the
  // fetch moves 1 MB at the one-rank link's 1 GB/s (1 ms), mul is
  // FLOP-bound (2 GFLOP at 1 TFLOP/s = 2 ms) and starts when w is there.
  Prediction p = simulate(b.p, hw);
  EXPECT_DOUBLE_EQ(p.timeline[0].end, 8e-9);
  EXPECT_EQ(p.timeline[1].bytes, 1000000u);
  EXPECT_DOUBLE_EQ(p.timeline[1].end, 1e-3);
  EXPECT_DOUBLE_EQ(p.timeline[2].start, 1e-3);
  EXPECT_NEAR(p.stepSeconds, 3e-3, 1e-12);
  EXPECT_NEAR(p.busySeconds[STREAM_COMPUTE], 2e-3 + 8e-9, 1e-12);
  EXPECT_DOUBLE_EQ(p.busySeconds[STREAM_H2D], 1e-3);
  // No schedule beats the compute stream's 2 ms; this one idles 1 ms.
  EXPECT_EQ(p.bottleneck, STREAM_COMPUTE);
  EXPECT_NEAR(p.overlapEfficiency(), (2e-3 + 8e-9) / 3e-3, 1e-9);
}

// A stream that reaches a wait before its event is signalled blocks and
// pays the wake-up (event_wait_seconds); one that reaches it later finds
// the event set and pays nothing. Products pay gemm_launch_seconds, other
// kernels kernel_launch_seconds.
TEST(PlanSimulator, BlockedWaitsPayTheWakeUpAndProductsTheirLaunch) {
  PlanBuilder b;
  int x = b.tensor("x", TIER_GPU, 0, 1000);
  int y = b.tensor("y", TIER_GPU, 4096, 1000);
  int wHost = b.tensor("w.host", TIER_CPU, 0, 250000, ROLE_PARAMETER);
  int w = b.tensor("w", TIER_GPU, 8192, 250000);
  int z = b.tensor("z", TIER_GPU, 1 << 20, 1000);
  int v = b.tensor("v", TIER_GPU, 2 << 20, 1000);
  b.inst("fetch", "zinc.Copy", STREAM_H2D, {wHost}, {w}, {}, {0});
  b.inst("mul", "FusedMatMul", STREAM_COMPUTE, {x, w}, {z}, {0}).set_flops(2e9);
  b.inst("late", "zinc.Copy", STREAM_D2H, {z}, {y}, {}, {1});
  b.inst("relu", "Relu", STREAM_COMPUTE, {x}, {v}).set_flops(1000);
  Hardware hw = roundHardware();
  hw.kernelLaunchSeconds = 1e-6;
  hw.gemmLaunchSeconds = 10e-6;
  hw.eventWaitSeconds = 100e-6;
  Prediction p = simulate(b.p, hw);
  // The product waits for the 1 ms fetch: it starts 100 us after it.
  EXPECT_DOUBLE_EQ(p.timeline[1].start, 1e-3 + 100e-6);
  EXPECT_NEAR(p.timeline[1].end - p.timeline[1].start, 10e-6 + 2e-3, 1e-12);
  // relu waits for nothing: 1 us launch plus its 8 ns of bytes.
  EXPECT_NEAR(p.timeline[3].end - p.timeline[3].start, 1e-6 + 8e-9, 1e-15);
  // Counting instructions prices no wake-up.
  Prediction count = simulate(b.p, hw, CostModel::InstructionCount);
  EXPECT_DOUBLE_EQ(count.timeline[1].start, 1e-6);
}

// A wait whose event was signalled before its stream got there costs
// nothing extra.
TEST(PlanSimulator, AWaitAlreadySatisfiedPaysNoWakeUp) {
  PlanBuilder b;
  int x = b.tensor("x", TIER_GPU, 0, 1000);
  int y = b.tensor("y", TIER_GPU, 4096, 1000);
  int z = b.tensor("z", TIER_GPU, 8192, 1000);
  int host = b.tensor("h", TIER_CPU, 0, 1000);
  b.inst("store", "zinc.Copy", STREAM_D2H, {x}, {host}, {}, {0});
  b.inst("slow", "Relu", STREAM_COMPUTE, {x}, {y}).set_flops(1e9);
  b.inst("after", "Relu", STREAM_COMPUTE, {host}, {z}, {0}).set_flops(1000);
  Hardware hw = roundHardware();
  hw.eventWaitSeconds = 100e-6;
  Prediction p = simulate(b.p, hw);
  // store ends after 0.5 us; slow runs 1 ms; after starts right then.
  EXPECT_DOUBLE_EQ(p.timeline[2].start, p.timeline[1].end);
}

TEST(PlanSimulator, TransfersAndHostUpdatesArePricedByTheirLink) {
  PlanBuilder b;
  b.tier(TIER_CPU, 0, 1 << 24);
  b.tier(TIER_NVME, 0, 1 << 24);
  int mNvme = b.tensor("m.nvme", TIER_NVME, 0, 1000000, ROLE_STATE);
  int m = b.tensor("m", TIER_CPU, 0, 1000000);
  int g = b.tensor("g", TIER_CPU, 4000000, 1000000);
  int p = b.tensor("p", TIER_CPU, 8000000, 1000000, ROLE_PARAMETER);
  int gGpu = b.tensor("g.gpu", TIER_GPU, 0, 1000000);
  b.inst("read", "zinc.Copy", STREAM_NVME, {mNvme}, {m}, {}, {0});
  b.inst("grad out", "zinc.CopyInto", STREAM_D2H, {gGpu, g}, {}, {}, {1});
  b.inst("adam", "zinc.AdamW", STREAM_HOST, {p, g, m}, {}, {0, 1}, {2});
  b.inst("write", "zinc.CopyInto", STREAM_NVME, {m, mNvme}, {}, {2});
  b.p.set_ranks(8);
  Prediction pred = simulate(b.p, roundHardware());
  // 4 MB at 8 GB/s over 8 ranks of the node: 4 ms each way at 1 GB/s.
  EXPECT_DOUBLE_EQ(pred.timeline[0].end, 4e-3);
  // 4 MB at 2 GB/s shared by a pair of ranks: 4 ms.
  EXPECT_DOUBLE_EQ(pred.timeline[1].end, 4e-3);
  // 1M parameters at 8e9/s over 8 ranks: 1 ms, after both.
  EXPECT_DOUBLE_EQ(pred.timeline[2].start, 4e-3);
  EXPECT_DOUBLE_EQ(pred.timeline[2].end, 5e-3);
  // 4 MB written at 4 GB/s over 8 ranks: 8 ms.
  EXPECT_DOUBLE_EQ(pred.timeline[3].end, 13e-3);
  EXPECT_EQ(pred.bottleneck, STREAM_NVME);
  EXPECT_DOUBLE_EQ(pred.lowerBoundSeconds, 12e-3);
}

TEST(PlanSimulator, CollectivesFollowTheRingAlgorithm) {
  PlanBuilder b;
  int shard = b.tensor("w.shard", TIER_GPU, 0, 1000, ROLE_PARAMETER);
  int whole = b.tensor("w", TIER_GPU, 4096, 8000);
  b.inst("gather", "zinc.AllGather", STREAM_COLLECTIVE, {shard}, {whole});
  b.inst("reduce", "zinc.AllReduce", STREAM_COLLECTIVE, {whole}, {});
  Hardware hw = roundHardware();
  // 8 ranks in one node: 7/8 of 32 KB at 100 GB/s plus 7 latencies.
  b.p.set_ranks(8);
  Prediction in = simulate(b.p, hw);
  double gather = 7.0 / 8 * 32000 / 100e9 + 7 * 1e-6;
  EXPECT_NEAR(in.timeline[0].end, gather, 1e-15);
  EXPECT_EQ(in.timeline[0].bytes, 32000u);
  // An all-reduce is a reduce-scatter and an all-gather.
  EXPECT_NEAR(in.timeline[1].end - in.timeline[1].start, 2 * gather, 1e-15);
  // 16 ranks span nodes: the slower links set the pace.
  b.p.set_ranks(16);
  Prediction across = simulate(b.p, hw);
  EXPECT_NEAR(across.timeline[0].end, 15.0 / 16 * 32000 / 10e9 + 15 * 10e-6, 1e-15);
}

TEST(PlanSimulator, HalfPrecisionKernelsUseTensorCoreRates) {
  PlanBuilder b;
  int x = b.tensor("x", TIER_GPU, 0, 10);
  b.p.mutable_tensors(x)->set_dtype(10); // ONNX FLOAT16
  int y = b.tensor("y", TIER_GPU, 64, 10);
  b.p.mutable_tensors(y)->set_dtype(10);
  b.inst("mm", "MatMul", STREAM_COMPUTE, {x, x}, {y}).set_flops(8e9);
  EXPECT_DOUBLE_EQ(simulate(b.p, roundHardware()).stepSeconds, 1e-3);
}

/// A plan of 1 MB host and NVMe tensors for the NVMe lane's tests.
struct LanePlan {
  PlanBuilder b;
  LanePlan() {
    b.tier(TIER_CPU, 0, 1 << 24);
    b.tier(TIER_NVME, 0, 1 << 24);
  }
  int host(const std::string &name, uint64_t offset) {
    return b.tensor(name, TIER_CPU, offset, 250000);
  }
  int onNvme(const std::string &name, uint64_t offset) {
    return b.tensor(name, TIER_NVME, offset, 250000, ROLE_STATE);
  }
  void write(const std::string &name, int from, int to) {
    b.inst(name, "zinc.CopyInto", STREAM_NVME, {from, to}, {});
  }
};

/// Instruction `i` of `p` runs over [start, end] (seconds).
void expectSpan(const Prediction &p, int i, double start, double end) {
  EXPECT_NEAR(p.timeline[i].start, start, 1e-12) << "instruction " << i;
  EXPECT_NEAR(p.timeline[i].end, end, 1e-12) << "instruction " << i;
}

// The NVMe lane holds back write-backs that signal nothing and writes them
// as one batch (NvmeWriteBehind.h): the read after them goes first, and a
// request that finds the tier idle pays its latency.
TEST(PlanSimulator, HeldBackWritesGoOutTogetherAfterTheReads) {
  LanePlan lane;
  int m1 = lane.host("m1", 0), m2 = lane.host("m2", 1 << 20), r = lane.host("r", 2 << 20);
  int y = lane.b.tensor("y", TIER_GPU, 0, 1000);
  lane.write("write m1", m1, lane.onNvme("m1.nvme", 0));
  lane.write("write m2", m2, lane.onNvme("m2.nvme", 1 << 20));
  lane.b.inst("read r", "zinc.Copy", STREAM_NVME, {lane.onNvme("r.nvme", 2 << 20)}, {r}, {},
              {0});
  lane.b.inst("use r", "Relu", STREAM_COMPUTE, {r}, {y}, {0}).set_flops(1000);
  Hardware hw = roundHardware();
  hw.nvmeReadLatencySeconds = 20e-6;
  hw.nvmeWriteLatencySeconds = 50e-6;
  Prediction p = simulate(lane.b.p, hw);
  // The read finds the tier idle: 20 us, then 1 MB at 8 GB/s.
  expectSpan(p, 2, 0, 145e-6);
  EXPECT_NEAR(p.timeline[3].start, 145e-6, 1e-12);
  // Both writes, 2 MB at 4 GB/s, queued behind the read: no latency.
  expectSpan(p, 0, 145e-6, 645e-6);
  expectSpan(p, 1, 145e-6, 645e-6);
  EXPECT_NEAR(p.stepSeconds, 645e-6, 1e-12);
  EXPECT_NEAR(p.busySeconds[STREAM_NVME], 20e-6 + 125e-6 + 500e-6, 1e-12);

  // Counting instructions keeps plan order.
  Prediction count = simulate(lane.b.p, hw, CostModel::InstructionCount);
  EXPECT_DOUBLE_EQ(count.timeline[2].start, 2e-6);
}

// A lane copy that reads the sectors of a held-back write (or fills the host
// bytes it reads) waits for the batch, as the runtime's lane makes it.
TEST(PlanSimulator, ACopyTouchingAHeldWriteWaitsForItsBatch) {
  LanePlan lane;
  int m = lane.host("m", 0), other = lane.host("other", 1 << 20);
  int mNvme = lane.onNvme("m.nvme", 0);
  lane.write("write m", m, mNvme);
  lane.b.inst("read m back", "zinc.Copy", STREAM_NVME, {mNvme}, {other}, {}, {0});
  lane.write("write m again", other, mNvme);
  lane.b.inst("refill other", "zinc.Copy", STREAM_NVME, {lane.onNvme("o.nvme", 1 << 20)},
              {other}, {}, {1});
  Hardware hw = roundHardware();
  hw.nvmeWriteLatencySeconds = 50e-6;
  Prediction p = simulate(lane.b.p, hw);
  // The first write goes out alone (50 us + 250 us), then the read.
  expectSpan(p, 0, 0, 300e-6);
  expectSpan(p, 1, 300e-6, 425e-6);
  // The refill fills the host bytes the second write reads: after it.
  expectSpan(p, 2, 425e-6, 675e-6);
  expectSpan(p, 3, 675e-6, 800e-6);
}

// The lane meets a conflicting copy's events before it writes the batch (a
// batch never goes out early to make room), and a copy staged through the
// bounce buffer (a host tensor off a sector boundary) is never held and goes
// after every held write.
TEST(PlanSimulator, TheBatchWaitsForTheConflictingCopysEventsAndStagedCopiesRunAlone) {
  LanePlan lane;
  int m = lane.host("m", 0), other = lane.host("other", 1 << 20);
  int odd = lane.host("odd", (2 << 20) + 512);
  int mNvme = lane.onNvme("m.nvme", 0), oddNvme = lane.onNvme("odd.nvme", 2 << 20);
  int x = lane.b.tensor("x", TIER_GPU, 0, 1000), y = lane.b.tensor("y", TIER_GPU, 4096, 1000);
  lane.write("write m", m, mNvme);
  lane.b.inst("slow", "Relu", STREAM_COMPUTE, {x}, {y}, {}, {0}).set_flops(1e10);
  lane.b.inst("read m back", "zinc.Copy", STREAM_NVME, {mNvme}, {other}, {0}, {1});
  lane.write("write odd", odd, oddNvme);
  lane.write("write m again", other, mNvme);
  lane.write("write odd again", odd, oddNvme);
  Prediction p = simulate(lane.b.p, roundHardware());
  // slow: 10 GFLOP at 1 TFLOP/s. The batch goes out when the read's event
  // is met, then the read.
  expectSpan(p, 0, 10e-3, 10.25e-3);
  expectSpan(p, 2, 10.25e-3, 10.375e-3);
  // The staged write is not held: it runs in plan order.
  expectSpan(p, 3, 10.375e-3, 10.625e-3);
  // The next staged write first sends the held one out.
  expectSpan(p, 4, 10.625e-3, 10.875e-3);
  expectSpan(p, 5, 10.875e-3, 11.125e-3);
}

// Without copy engines (the cpu backend) copies and updates run on the
// cores compute's team holds: compute loses the time they overlap it.
TEST(PlanSimulator, ComputeLosesWhatCopiesOnItsCoresTake) {
  PlanBuilder b;
  int x = b.tensor("x", TIER_GPU, 0, 1000);
  int z = b.tensor("z", TIER_GPU, 4096, 1000);
  int wHost = b.tensor("w.host", TIER_CPU, 0, 250000, ROLE_PARAMETER);
  int w = b.tensor("w", TIER_GPU, 8192, 250000);
  b.inst("mul", "Mul", STREAM_COMPUTE, {x, x}, {z}).set_flops(2e9);
  b.inst("fetch", "zinc.Copy", STREAM_H2D, {wHost}, {w}, {}, {0});
  Hardware hw = roundHardware();
  // With copy engines: 2 ms of compute beside a 1 ms fetch.
  Prediction engines = simulate(b.p, hw);
  EXPECT_NEAR(engines.timeline[0].end, 2e-3, 1e-12);
  hw.copyEngines = false;
  Prediction shared = simulate(b.p, hw);
  EXPECT_NEAR(shared.timeline[0].end, 3e-3, 1e-12);
  EXPECT_NEAR(shared.timeline[1].end, 1e-3, 1e-12);
  EXPECT_NEAR(shared.stepSeconds, 3e-3, 1e-12);
  EXPECT_NEAR(shared.busySeconds[STREAM_COMPUTE], 3e-3, 1e-12);
  // Each instruction that starts while compute runs also costs it the
  // preemption: the switch, and the team waiting for its lent thread.
  hw.preemptionSeconds = 50e-6;
  Prediction preempted = simulate(b.p, hw);
  EXPECT_NEAR(preempted.timeline[0].end, 3.05e-3, 1e-12);
  // Counting instructions shares nothing.
  Prediction count = simulate(b.p, hw, CostModel::InstructionCount);
  EXPECT_DOUBLE_EQ(count.timeline[0].end, 1e-6);
}

TEST(PlanSimulator, EventsOutOfRangeAreACorruptPlan) {
  PlanBuilder b;
  int x = b.tensor("x", TIER_GPU, 0, 4);
  b.inst("relu", "Relu", STREAM_COMPUTE, {x}, {x}, {3});
  auto p = simulatePlan(b.p, roundHardware());
  ASSERT_FALSE(static_cast<bool>(p));
  EXPECT_EQ(llvm::toString(p.takeError()), "instruction 0 ('relu') waits on event 3 of 0");

  // A wait before any signal of its event, and a tensor that is not there:
  // plans the runtime refuses are not priced either.
  PlanBuilder early;
  int y = early.tensor("y", TIER_GPU, 0, 4);
  early.inst("relu", "Relu", STREAM_COMPUTE, {y}, {y}, {0});
  early.inst("exp", "Exp", STREAM_H2D, {y}, {y}, {}, {0});
  auto q = simulatePlan(early.p, roundHardware());
  ASSERT_FALSE(static_cast<bool>(q));
  EXPECT_EQ(llvm::toString(q.takeError()),
            "instruction 0 ('relu') waits on event 0, which no instruction before it signals");
  PlanBuilder missing;
  missing.inst("relu", "Relu", STREAM_COMPUTE, {7}, {});
  auto r = simulatePlan(missing.p, roundHardware());
  ASSERT_FALSE(static_cast<bool>(r));
  EXPECT_EQ(llvm::toString(r.takeError()), "instruction 0 ('relu') names tensor 7 of 0");
}

TEST(PlanSimulator, SummaryNamesPeaksStepAndBytes) {
  PlanBuilder b;
  b.tier(TIER_CPU, 1 << 30, 4000000);
  int wHost = b.tensor("w.host", TIER_CPU, 0, 1000000, ROLE_PARAMETER);
  int w = b.tensor("w", TIER_GPU, 0, 1000000);
  b.inst("fetch", "zinc.Copy", STREAM_H2D, {wHost}, {w});
  Prediction p = simulate(b.p, roundHardware());
  EXPECT_EQ(planSummary(b.p, p),
            "gpu 1.00 MiB, cpu 3.81 MiB of 1.00 GiB; predicted step 4.00 ms (lower bound "
            "4.00 ms, h2d-bound), overlap efficiency 1.00; per step: h2d 3.81 MiB");
}

// A measured kernel (kernel_seconds) is priced by its measurement, not by
// its FLOPs: linear between the points, proportional beyond them, plus the
// launch. Other ops keep the FLOP and byte model.
TEST(PlanSimulator, MeasuredKernelsArePricedByTheirMeasurement) {
  Hardware hw = roundHardware();
  hw.kernelLaunchSeconds = 1e-6;
  hw.kernelTimes["Gelu"] = {{1000, 10e-6}, {3000, 20e-6}};
  EXPECT_DOUBLE_EQ(*hw.measuredKernelSeconds("Gelu", 2000), 1e-6 + 15e-6);
  EXPECT_DOUBLE_EQ(*hw.measuredKernelSeconds("Gelu", 500), 1e-6 + 5e-6);
  EXPECT_DOUBLE_EQ(*hw.measuredKernelSeconds("Gelu", 6000), 1e-6 + 40e-6);
  EXPECT_FALSE(hw.measuredKernelSeconds("Relu", 2000).hasValue());
  PlanBuilder b;
  int x = b.tensor("x", TIER_GPU, 0, 2000);
  int y = b.tensor("y", TIER_GPU, 8192, 2000);
  int z = b.tensor("z", TIER_GPU, 16384, 2000);
  b.inst("gelu", "Gelu", STREAM_COMPUTE, {x}, {y}).set_flops(2000);
  b.inst("relu", "Relu", STREAM_COMPUTE, {y}, {z}).set_flops(2000);
  Prediction p = simulate(b.p, hw);
  EXPECT_NEAR(p.timeline[0].end - p.timeline[0].start, 16e-6, 1e-15);
  // relu: 1 us launch and 16 kB at 1 TB/s.
  EXPECT_NEAR(p.timeline[1].end - p.timeline[1].start, 1e-6 + 16e-9, 1e-15);
}

// Measured fp32 products (product_seconds) are priced by FLOPs along the
// measured curve: from gemm_launch_seconds at no FLOPs to the first point,
// linear between points, and beyond the last at the peak rate. 16-bit
// products, which were not measured, keep the launch and peak-rate model.
TEST(PlanSimulator, MeasuredProductsFollowTheirCurve) {
  Hardware hw = roundHardware();
  hw.kernelLaunchSeconds = 1e-6;
  hw.gemmLaunchSeconds = 10e-6;
  hw.gpuFlopsFp32 = 1e12;
  hw.productTimes = {{1e6, 30e-6}, {4e6, 60e-6}};
  EXPECT_DOUBLE_EQ(hw.measuredProductSeconds(0), 10e-6);
  EXPECT_DOUBLE_EQ(hw.measuredProductSeconds(0.5e6), 20e-6);
  EXPECT_DOUBLE_EQ(hw.measuredProductSeconds(2e6), 40e-6);
  EXPECT_DOUBLE_EQ(hw.measuredProductSeconds(4e6), 60e-6);
  EXPECT_DOUBLE_EQ(hw.measuredProductSeconds(10e6), 60e-6 + 6e6 / 1e12);
  EXPECT_DOUBLE_EQ(hw.kernelSeconds(2e6, 1e3, /*half=*/false, /*product=*/true), 1e-6 + 40e-6);
  EXPECT_DOUBLE_EQ(hw.kernelSeconds(2e6, 1e3, /*half=*/true, /*product=*/true),
                   10e-6 + 2e6 / hw.gpuFlopsHalf);
  // Not a product: the FLOP and byte model.
  EXPECT_DOUBLE_EQ(hw.kernelSeconds(2e6, 1e3, false, false), 1e-6 + 2e6 / 1e12);
  PlanBuilder b;
  int x = b.tensor("x", TIER_GPU, 0, 1000);
  int w = b.tensor("w", TIER_GPU, 4096, 1000);
  int y = b.tensor("y", TIER_GPU, 8192, 1000);
  b.inst("product", "MatMul", STREAM_COMPUTE, {x, w}, {y}).set_flops(2000000);
  Prediction p = simulate(b.p, hw);
  EXPECT_NEAR(p.timeline[0].end - p.timeline[0].start, 41e-6, 1e-15);
}

TEST(HardwareDescription, MeasuredProductsRoundTrip) {
  auto hw = parseHardwareJson(R"({"product_seconds": [[1.0e6, 2.2e-5], [4.2e6, 7.5e-5]]})",
                              "hw.json");
  ASSERT_TRUE(static_cast<bool>(hw)) << llvm::toString(hw.takeError());
  EXPECT_EQ(hw->productTimes, (KernelTimePoints{{1.0e6, 2.2e-5}, {4.2e6, 7.5e-5}}));
  auto back = parseHardwareJson(hardwareToJson(*hw), "round trip");
  ASSERT_TRUE(static_cast<bool>(back)) << llvm::toString(back.takeError());
  EXPECT_EQ(back->productTimes, hw->productTimes);
  // The presets measure nothing.
  auto v100 = loadHardware("dgx2-v100");
  ASSERT_TRUE(static_cast<bool>(v100));
  EXPECT_TRUE(v100->productTimes.empty());
}

TEST(HardwareDescription, MeasuredKernelsRoundTrip) {
  auto hw = parseHardwareJson(
      R"({"kernel_seconds": {"Gelu": [[16384, 3.5e-5], [262144, 5.6e-4]], "Softmax": [[1, 0]]}})",
      "hw.json");
  ASSERT_TRUE(static_cast<bool>(hw)) << llvm::toString(hw.takeError());
  ASSERT_EQ(hw->kernelTimes.size(), 2u);
  EXPECT_EQ(hw->kernelTimes["Gelu"], (KernelTimePoints{{16384, 3.5e-5}, {262144, 5.6e-4}}));
  auto back = parseHardwareJson(hardwareToJson(*hw), "round trip");
  ASSERT_TRUE(static_cast<bool>(back)) << llvm::toString(back.takeError());
  EXPECT_EQ(back->kernelTimes, hw->kernelTimes);
}

// The fields only a calibration fills (zero in the presets) survive the
// file --calibrate writes and --hw reads.
TEST(HardwareDescription, CalibratedLatenciesRoundTrip) {
  Hardware hw = roundHardware();
  hw.preemptionSeconds = 9e-6;
  hw.nvmeReadLatencySeconds = 30e-6;
  hw.nvmeWriteLatencySeconds = 150e-6;
  auto back = parseHardwareJson(hardwareToJson(hw), "round trip");
  ASSERT_TRUE(static_cast<bool>(back)) << llvm::toString(back.takeError());
  EXPECT_DOUBLE_EQ(back->preemptionSeconds, 9e-6);
  EXPECT_DOUBLE_EQ(back->nvmeReadLatencySeconds, 30e-6);
  EXPECT_DOUBLE_EQ(back->nvmeWriteLatencySeconds, 150e-6);
  auto negative = parseHardwareJson(R"({"preemption_seconds": -1})", "hw.json");
  ASSERT_FALSE(static_cast<bool>(negative));
  EXPECT_EQ(llvm::toString(negative.takeError()),
            "hw.json: preemption_seconds must be a number of seconds >= 0");
}

TEST(HardwareDescription, JsonRoundTripsAndPresetsLoad) {
  for (const std::string &name : hardwarePresetNames()) {
    auto hw = loadHardware(name);
    ASSERT_TRUE(static_cast<bool>(hw)) << name << ": " << llvm::toString(hw.takeError());
    EXPECT_EQ(hw->name, name);
    EXPECT_GT(hw->gpuMem, 0u);
    EXPECT_GT(hw->gpuFlopsHalf, 0);
    EXPECT_GT(hw->interNodeBandwidth, 0);
    auto back = parseHardwareJson(hardwareToJson(*hw), "round trip");
    ASSERT_TRUE(static_cast<bool>(back)) << llvm::toString(back.takeError());
    EXPECT_EQ(hardwareToJson(*back), hardwareToJson(*hw));
  }
  auto v100 = loadHardware("dgx2-v100");
  ASSERT_TRUE(static_cast<bool>(v100));
  EXPECT_EQ(v100->gpuMem, 32ull << 30);
  EXPECT_EQ(v100->gpusPerNode, 16u);
  EXPECT_DOUBLE_EQ(v100->gpuFlopsHalf, 125e12);
  // GPUs copy on engines of their own; the cpu backend on its cores.
  EXPECT_TRUE(v100->copyEngines);
  auto cpu = loadHardware("cpu");
  ASSERT_TRUE(static_cast<bool>(cpu));
  EXPECT_FALSE(cpu->copyEngines);
}

TEST(HardwareDescription, BadFieldsAreNamed) {
  auto error = [](llvm::StringRef text) {
    auto hw = parseHardwareJson(text, "hw.json");
    return hw ? std::string() : llvm::toString(hw.takeError());
  };
  EXPECT_EQ(error(R"({"gpu_memory": "8GiB"})"),
            "hw.json: unknown field 'gpu_memory' (docs/hardware.md lists them)");
  EXPECT_EQ(error(R"({"h2d_bandwidth": -1})"), "hw.json: h2d_bandwidth must be a positive number");
  EXPECT_EQ(error(R"({"copy_engines": 1})"), "hw.json: copy_engines must be true or false");
  EXPECT_EQ(error(R"({"copy_engines": true})"), "");
  EXPECT_EQ(error(R"({"h2d_bandwidth": 0})"), "hw.json: h2d_bandwidth must be a positive number");
  // Latencies and launch costs may be zero, not negative.
  EXPECT_EQ(error(R"({"kernel_launch_seconds": 0, "inter_node_latency": 0})"), "");
  EXPECT_EQ(error(R"({"intra_node_latency": -1e-6})"),
            "hw.json: intra_node_latency must be a number of seconds >= 0");
  EXPECT_EQ(error(R"({"gpus_per_node": 0})"),
            "hw.json: gpus_per_node must be a whole number between 1 and 2^20");
  EXPECT_EQ(error(R"({"gpu_mem": true})"),
            "hw.json: gpu_mem must be a size (bytes, or a string such as \"32GiB\")");
  EXPECT_EQ(error("[1]"), "hw.json: expected a JSON object");
  EXPECT_EQ(error(R"({"gpu_mem": "8GiB", "sources": {"gpu_mem": "a datasheet"}})"), "");
  EXPECT_EQ(error(R"({"kernel_seconds": [1]})"),
            "hw.json: kernel_seconds must be an object of op names");
  EXPECT_EQ(error(R"({"kernel_seconds": {"Gelu": []}})"),
            "hw.json: kernel_seconds.Gelu must be a non-empty list of [elements, seconds]");
  EXPECT_EQ(error(R"({"kernel_seconds": {"Gelu": [[0, 1e-6]]}})"),
            "hw.json: kernel_seconds.Gelu: each point must be [elements > 0, seconds >= 0]");
  EXPECT_EQ(error(R"({"kernel_seconds": {"Gelu": [[10, 1e-6, 3]]}})"),
            "hw.json: kernel_seconds.Gelu: each point must be [elements > 0, seconds >= 0]");
  EXPECT_EQ(error(R"({"kernel_seconds": {"Gelu": [[10, 1e-6], [10, 2e-6]]}})"),
            "hw.json: kernel_seconds.Gelu: the elements must increase from point to point");
  EXPECT_EQ(error(R"({"product_seconds": {"MatMul": 1}})"),
            "hw.json: product_seconds must be a non-empty list of [FLOPs, seconds]");
  EXPECT_EQ(error(R"({"product_seconds": [[1e6, -1]]})"),
            "hw.json: product_seconds: each point must be [FLOPs > 0, seconds >= 0]");
  EXPECT_EQ(error(R"({"product_seconds": [[4e6, 1e-5], [1e6, 2e-5]]})"),
            "hw.json: product_seconds: the FLOPs must increase from point to point");
}

} // namespace
