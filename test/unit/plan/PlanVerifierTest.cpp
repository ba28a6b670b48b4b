//===- PlanVerifierTest.cpp - Each check of the plan verifier -------------===//
//
// Plans are built directly as protobuf: every check has a plan that passes
// and one that fails with its exact message, and a large generated plan
// shows the verifier stays fast.
//
//===----------------------------------------------------------------------===//
#include "PlanBuilder.h"
#include <chrono>

using namespace zinc::plan;
using zinc::plan::test::PlanBuilder;
using zinc::plan::test::verifyError;

namespace {

/// An offloaded layer: the weight lives on the CPU, is prefetched into a GPU
/// buffer, used by compute, the result is offloaded and updated on the host.
PlanBuilder offloadedLayer() {
  PlanBuilder b;
  b.tier(TIER_CPU, 0, 1024);
  int x = b.tensor("x", TIER_GPU, 0, 16, ROLE_INPUT);       // gpu [0, 64)
  int w = b.tensor("w", TIER_CPU, 0, 16, ROLE_PARAMETER);   // cpu [0, 64)
  int wg = b.tensor("w.gpu", TIER_GPU, 64, 16);             // gpu [64, 128)
  int y = b.tensor("y", TIER_GPU, 128, 16);                 // gpu [128, 192)
  int yc = b.tensor("y.cpu", TIER_CPU, 64, 16, ROLE_STATE); // cpu [64, 128)
  b.inst("fetch_w", "zinc.Copy", STREAM_H2D, {w}, {wg}, {}, {0});
  b.inst("Mul_0", "Mul", STREAM_COMPUTE, {x, wg}, {y}, {0}, {1});
  b.inst("offload_y", "zinc.CopyInto", STREAM_D2H, {y, yc}, {}, {1}, {2});
  b.inst("update", "zinc.AdamStep", STREAM_HOST, {w, yc}, {}, {2});
  b.p.add_outputs(y);
  return b;
}

} // namespace

TEST(PlanVerifierTest, AcceptsAnOffloadedLayer) {
  EXPECT_EQ(verifyError(offloadedLayer().p), "");
}

TEST(PlanVerifierTest, AcceptsAnEmptyPlan) {
  PlanBuilder b;
  EXPECT_EQ(verifyError(b.p), "");
}

//===--- 1. Well-formedness -----------------------------------------------===//

TEST(PlanVerifierTest, TensorIdsMustBeDense) {
  PlanBuilder b = offloadedLayer();
  b.p.mutable_tensors(2)->set_id(7);
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: tensor 'w.gpu' is listed at index 2 but "
            "has id 7; tensor ids must be 0, 1, 2, ... in order");
}

TEST(PlanVerifierTest, OperandIdsMustBeInRange) {
  PlanBuilder b = offloadedLayer();
  b.p.mutable_instructions(1)->set_inputs(1, 9);
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: node 'Mul_0' (Mul) input 1 is tensor 9, "
            "out of range (the plan has 5 tensors)");
  b = offloadedLayer();
  b.p.mutable_instructions(1)->set_outputs(0, -2);
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: node 'Mul_0' (Mul) output 0 is tensor -2, "
            "out of range (the plan has 5 tensors)");
  b = offloadedLayer();
  b.p.add_outputs(5);
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: graph output 1 is tensor 5, out of range "
            "(the plan has 5 tensors)");
  // -1 is an absent optional operand.
  b = offloadedLayer();
  b.p.mutable_instructions(1)->add_inputs(-1);
  EXPECT_EQ(verifyError(b.p), "");
}

TEST(PlanVerifierTest, DTypesMustBeKnownAndSizesMustMatch) {
  PlanBuilder b = offloadedLayer();
  b.p.mutable_tensors(0)->set_dtype(8); // ONNX string
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: tensor 'x' has dtype 8, which zinc cannot hold");
  b = offloadedLayer();
  b.p.mutable_tensors(0)->set_size_bytes(60);
  EXPECT_EQ(
      verifyError(b.p),
      "plan verifier: tensor 'x' has size_bytes 60 but f32[16] is 64 bytes");
  b = offloadedLayer();
  b.p.mutable_tensors(0)->set_dtype(10); // f16: 32 bytes
  EXPECT_EQ(
      verifyError(b.p),
      "plan verifier: tensor 'x' has size_bytes 64 but f16[16] is 32 bytes");
  b.p.mutable_tensors(0)->set_size_bytes(32);
  EXPECT_EQ(verifyError(b.p), "");
}

TEST(PlanVerifierTest, EveryTierUsedNeedsATierInfo) {
  PlanBuilder b = offloadedLayer();
  b.tensor("spill", TIER_NVME, 0, 4);
  EXPECT_EQ(verifyError(b.p), "plan verifier: tensor 'spill' is in the nvme "
                              "tier, which has no TierInfo");
  b.tier(TIER_NVME, 0, 4096);
  EXPECT_EQ(verifyError(b.p), "");
  *b.p.add_tiers() = b.p.tiers(0);
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: the gpu tier has two TierInfo entries");
}

TEST(PlanVerifierTest, EventsAreSignalledExactlyOnceAndInRange) {
  PlanBuilder b = offloadedLayer();
  b.p.mutable_instructions(2)->add_signal_events(0);
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: event 0 is signalled by both node "
            "'fetch_w' (zinc.Copy) and node 'offload_y' (zinc.CopyInto)");
  b = offloadedLayer();
  b.p.mutable_instructions(3)->add_wait_events(3);
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: node 'update' (zinc.AdamStep) waits on "
            "event 3, out of range (the plan has 3 events)");
  b = offloadedLayer();
  b.p.set_num_events(4);
  EXPECT_EQ(
      verifyError(b.p),
      "plan verifier: event 3 is never signalled (the plan has 4 events)");
  b = offloadedLayer();
  b.p.mutable_instructions(0)->clear_signal_events();
  EXPECT_EQ(
      verifyError(b.p),
      "plan verifier: event 0 is never signalled (the plan has 3 events)");
}

// A kernel workspace: one per kernel stream, in the tier its kernels work
// in, no instruction's operand.
TEST(PlanVerifierTest, WorkspacesBelongToAKernelStream) {
  PlanBuilder b = offloadedLayer();
  int ws = b.tensor("zinc.workspace.compute", TIER_GPU, 192, 16);
  Workspace *w = b.p.add_workspaces();
  w->set_stream(STREAM_COMPUTE);
  w->set_tensor(ws);
  EXPECT_EQ(verifyError(b.p), "");
  w->set_stream(STREAM_HOST);
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: the host stream's workspace tensor "
            "'zinc.workspace.compute' is in the gpu tier; the host stream's "
            "kernels work in the cpu tier");
  w->set_stream(STREAM_H2D);
  EXPECT_EQ(verifyError(b.p), "plan verifier: the h2d stream's workspace: "
                              "the h2d stream runs no kernels");
  w->set_stream(STREAM_COMPUTE);
  w->set_tensor(99);
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: the compute stream's workspace is tensor 99, out "
            "of range (the plan has 6 tensors)");
  w->set_tensor(ws);
  *b.p.add_workspaces() = *w;
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: the compute stream has two workspaces");
  b.p.mutable_workspaces()->RemoveLast();
  b.p.mutable_instructions(1)->set_outputs(0, ws);
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: node 'Mul_0' (Mul) names tensor "
            "'zinc.workspace.compute', a stream's workspace, as an operand");
}

// A workspace is live the whole step: no tensor may share its bytes, even
// where no instruction names it.
TEST(PlanVerifierTest, WorkspacesAreLiveTheWholeStep) {
  PlanBuilder b;
  int x = b.tensor("x", TIER_GPU, 0, 16, ROLE_INPUT);
  int y = b.tensor("y", TIER_GPU, 64, 16);
  int ws = b.tensor("zinc.workspace.compute", TIER_GPU, 128, 16);
  b.inst("Relu_0", "Relu", STREAM_COMPUTE, {x}, {y});
  Workspace *w = b.p.add_workspaces();
  w->set_stream(STREAM_COMPUTE);
  w->set_tensor(ws);
  EXPECT_EQ(verifyError(b.p), "");
  b.p.mutable_tensors(y)->set_offset(128);
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: tensors 'y' [128, 192) and "
            "'zinc.workspace.compute' [128, 192) of the gpu tier overlap and "
            "are both live at node 'Relu_0' (Relu)");
}

//===--- 2. Residency -----------------------------------------------------===//

TEST(PlanVerifierTest, ComputeOperandsMustBeOnTheGpu) {
  PlanBuilder b;
  b.tier(TIER_CPU, 0, 1024);
  int x = b.tensor("x", TIER_GPU, 0, 16, ROLE_INPUT);
  int w = b.tensor("w", TIER_CPU, 0, 16, ROLE_PARAMETER);
  int y = b.tensor("y", TIER_GPU, 64, 16);
  b.inst("MatMul_3", "MatMul", STREAM_COMPUTE, {x, w}, {y});
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: node 'MatMul_3' (MatMul) on the compute "
            "stream reads tensor 'w' which is in the cpu tier");
  b.p.mutable_tensors(w)->set_tier(TIER_GPU);
  b.p.mutable_tensors(w)->set_offset(128);
  EXPECT_EQ(verifyError(b.p), "");
  b.p.mutable_tensors(y)->set_tier(TIER_CPU);
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: node 'MatMul_3' (MatMul) on the compute "
            "stream writes tensor 'y' which is in the cpu tier");
}

TEST(PlanVerifierTest, HostOperandsMustBeOnTheCpu) {
  PlanBuilder b = offloadedLayer();
  b.p.mutable_instructions(3)->set_inputs(0, 0); // x, a GPU tensor
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: node 'update' (zinc.AdamStep) on the host "
            "stream updates tensor 'x' which is in the gpu tier");
}

TEST(PlanVerifierTest, CollectiveOperandsMustBeOnTheGpu) {
  PlanBuilder b;
  b.tier(TIER_CPU, 0, 1024);
  int g = b.tensor("g", TIER_GPU, 0, 16, ROLE_STATE);
  b.inst("allreduce", "zinc.AllReduce", STREAM_COLLECTIVE, {g}, {});
  EXPECT_EQ(verifyError(b.p), "");
  b.p.mutable_tensors(g)->set_tier(TIER_CPU);
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: node 'allreduce' (zinc.AllReduce) on the "
            "collective stream updates tensor 'g' which is in the cpu tier");
}

TEST(PlanVerifierTest, TransferStreamsRunCopiesBetweenTheirTiers) {
  PlanBuilder b = offloadedLayer();
  b.p.mutable_instructions(0)->set_op("Relu");
  b.p.mutable_instructions(0)->set_domain("");
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: node 'fetch_w' (Relu) on the h2d stream: "
            "the h2d stream runs only zinc.Copy and zinc.CopyInto");
  b = offloadedLayer();
  b.p.mutable_instructions(0)->set_stream(STREAM_D2H);
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: node 'fetch_w' (zinc.Copy) on the d2h "
            "stream copies tensor 'w' in the cpu tier to tensor 'w.gpu' "
            "in the gpu tier; d2h copies gpu -> cpu");
  b = offloadedLayer();
  b.p.mutable_instructions(2)->set_stream(STREAM_H2D);
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: node 'offload_y' (zinc.CopyInto) on the h2d "
            "stream copies tensor 'y' in the gpu tier to tensor 'y.cpu' "
            "in the cpu tier; h2d copies cpu -> gpu");
  b = offloadedLayer();
  b.p.mutable_instructions(2)->add_outputs(1);
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: node 'offload_y' (zinc.CopyInto) on the d2h "
            "stream must have two inputs (source, destination) and no "
            "outputs");
}

TEST(PlanVerifierTest, NvmeCopiesGoBothWaysThroughTheCpu) {
  PlanBuilder b;
  b.tier(TIER_CPU, 0, 1024);
  b.tier(TIER_NVME, 0, 4096, 4096);
  int m = b.tensor("m", TIER_NVME, 0, 16, ROLE_STATE);
  int mc = b.tensor("m.cpu", TIER_CPU, 0, 16);
  b.inst("load_m", "zinc.Copy", STREAM_NVME, {m}, {mc});
  b.inst("store_m", "zinc.CopyInto", STREAM_NVME, {mc, m}, {});
  EXPECT_EQ(verifyError(b.p), "");
  b.p.mutable_tensors(mc)->set_tier(TIER_NVME);
  b.p.mutable_tensors(mc)->set_offset(4096);
  b.tier(TIER_NVME, 0, 8192, 4096);
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: node 'load_m' (zinc.Copy) on the nvme stream "
            "copies tensor 'm' in the nvme tier to tensor 'm.cpu' in the "
            "nvme tier; nvme copies nvme -> cpu or cpu -> nvme");
}

TEST(PlanVerifierTest, CopiesMoveEqualSizes) {
  PlanBuilder b = offloadedLayer();
  Tensor *wg = b.p.mutable_tensors(2);
  wg->set_shape(0, 8);
  wg->set_size_bytes(32);
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: node 'fetch_w' (zinc.Copy) on the h2d stream "
            "copies tensor 'w' (64 bytes) to tensor 'w.gpu' (32 bytes); "
            "the sizes must be equal");
}

//===--- 3. Placement -----------------------------------------------------===//

TEST(PlanVerifierTest, TensorsLieAlignedWithinThePeak) {
  PlanBuilder b = offloadedLayer();
  b.p.mutable_tensors(2)->set_offset(96);
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: tensor 'w.gpu' is at offset 96 of the gpu "
            "tier, not a multiple of its alignment 64");
  b = offloadedLayer();
  b.tier(TIER_GPU, 0, 160);
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: tensor 'y' occupies [128, 192) of the gpu "
            "tier, past its peak 160");
  b.tier(TIER_GPU, 0, 192);
  EXPECT_EQ(verifyError(b.p), "");
  // A 4-byte tensor still occupies a whole 32-byte extent.
  b.tier(TIER_GPU, 0, 220, 32);
  b.tensor("flag", TIER_GPU, 192, 1, ROLE_STATE);
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: tensor 'flag' occupies [192, 224) of the gpu "
            "tier, past its peak 220");
  b.tier(TIER_GPU, 0, 224, 32);
  EXPECT_EQ(verifyError(b.p), "");
  b.tier(TIER_GPU, 0, 4096, 256);
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: tensor 'w.gpu' is at offset 64 of the gpu "
            "tier, not a multiple of its alignment 256");
}

TEST(PlanVerifierTest, PeakFitsTheCapacity) {
  PlanBuilder b = offloadedLayer();
  b.tier(TIER_GPU, 4096, 192);
  EXPECT_EQ(verifyError(b.p), "");
  b.tier(TIER_GPU, 128, 192);
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: the gpu tier's peak 192 exceeds its capacity 128");
}

//===--- 4. No overlap in time and space ----------------------------------===//

TEST(PlanVerifierTest, LiveTensorsDoNotOverlap) {
  PlanBuilder b;
  int x = b.tensor("x", TIER_GPU, 0, 16, ROLE_INPUT);
  int h = b.tensor("h", TIER_GPU, 64, 16);
  int y = b.tensor("y", TIER_GPU, 128, 16);
  int z = b.tensor("z", TIER_GPU, 64, 16); // h's bytes, after h is dead
  b.inst("Relu_0", "Relu", STREAM_COMPUTE, {x}, {h});
  b.inst("Relu_1", "Relu", STREAM_COMPUTE, {h}, {y});
  b.inst("Relu_2", "Relu", STREAM_COMPUTE, {y}, {z});
  EXPECT_EQ(verifyError(b.p), "");
  // y over h: both live at Relu_1, where one is read and the other written.
  b.p.mutable_tensors(y)->set_offset(64);
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: tensors 'h' [64, 128) and 'y' [64, 128) of "
            "the gpu tier overlap and are both live at node 'Relu_1' "
            "(Relu)");
}

TEST(PlanVerifierTest, PersistentTensorsAreLiveTheWholeStep) {
  PlanBuilder b;
  int x = b.tensor("x", TIER_GPU, 0, 16, ROLE_INPUT);
  int h = b.tensor("h", TIER_GPU, 64, 16);
  int w = b.tensor("w", TIER_GPU, 128, 16, ROLE_PARAMETER);
  int y = b.tensor("y", TIER_GPU, 192, 16);
  b.inst("Relu_0", "Relu", STREAM_COMPUTE, {x}, {h});
  b.inst("Mul_1", "Mul", STREAM_COMPUTE, {h, w}, {y});
  EXPECT_EQ(verifyError(b.p), "");
  // x is an input, fed before the step and live throughout: y, written
  // after x's last use, still may not share its bytes.
  b.p.mutable_tensors(y)->set_offset(0);
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: tensors 'x' [0, 64) and 'y' [0, 64) of the "
            "gpu tier overlap and are both live at node 'Mul_1' (Mul)");
  b.p.mutable_tensors(y)->set_offset(192);
  b.tensor("m", TIER_GPU, 128, 4, ROLE_STATE); // never touched, still kept
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: tensors 'w' [128, 192) and 'm' [128, 192) "
            "of the gpu tier overlap and are both live for the whole step");
}

TEST(PlanVerifierTest, GraphOutputsLiveFromTheirDefinitionToTheEnd) {
  PlanBuilder b;
  int x = b.tensor("x", TIER_GPU, 0, 16, ROLE_INPUT);
  int h = b.tensor("h", TIER_GPU, 64, 16);
  int y = b.tensor("y", TIER_GPU, 128, 16);
  int out = b.tensor("out", TIER_GPU, 64, 16); // h's bytes, after h is dead
  int z = b.tensor("z", TIER_GPU, 128, 16);    // y's bytes, while out is live
  b.p.add_outputs(out);
  b.inst("Relu_0", "Relu", STREAM_COMPUTE, {x}, {h});
  b.inst("Relu_1", "Relu", STREAM_COMPUTE, {h}, {y});
  b.inst("Relu_2", "Relu", STREAM_COMPUTE, {y}, {out});
  b.inst("Relu_3", "Relu", STREAM_COMPUTE, {x}, {z});
  EXPECT_EQ(verifyError(b.p), "");
  // An output must survive until the runtime reads it after the step.
  b.p.mutable_tensors(z)->set_offset(64);
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: tensors 'out' [64, 128) and 'z' [64, 128) "
            "of the gpu tier overlap and are both live at node 'Relu_3' "
            "(Relu)");
}

TEST(PlanVerifierTest, TiersAreSeparateAddressSpaces) {
  PlanBuilder b = offloadedLayer();
  // w (cpu [0, 64)) and x (gpu [0, 64)) share offsets but not a tier.
  EXPECT_EQ(b.p.tensors(0).offset(), b.p.tensors(1).offset());
  EXPECT_EQ(verifyError(b.p), "");
  b.p.mutable_tensors(4)->set_offset(0); // y.cpu over w
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: tensors 'w' [0, 64) and 'y.cpu' [0, 64) of "
            "the cpu tier overlap and are both live for the whole step");
}

//===--- 5. Event order ---------------------------------------------------===//

TEST(PlanVerifierTest, EventsAreSignalledEarlierOnAnotherStream) {
  PlanBuilder b = offloadedLayer();
  // Mul_0 waits on the copy's event 0 and signals 1: fine. Now wait on
  // event 2, which offload_y signals after it.
  b.p.mutable_instructions(1)->add_wait_events(2);
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: node 'Mul_0' (Mul) on the compute stream "
            "waits on event 2, which node 'offload_y' (zinc.CopyInto) "
            "signals later");
  b = offloadedLayer();
  b.p.mutable_instructions(1)->add_wait_events(1);
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: node 'Mul_0' (Mul) on the compute stream "
            "waits on event 1, which it signals itself");
}

TEST(PlanVerifierTest, WaitingOnTheSameStreamIsReported) {
  PlanBuilder b;
  int x = b.tensor("x", TIER_GPU, 0, 16, ROLE_INPUT);
  int h = b.tensor("h", TIER_GPU, 64, 16);
  int y = b.tensor("y", TIER_GPU, 128, 16, ROLE_STATE);
  b.inst("A", "Relu", STREAM_COMPUTE, {x}, {h}, {}, {0});
  b.inst("B", "Relu", STREAM_COMPUTE, {h}, {y});
  EXPECT_EQ(verifyError(b.p), "");
  b.p.mutable_instructions(1)->add_wait_events(0);
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: node 'B' (Relu) on the compute stream waits "
            "on event 0, which node 'A' (Relu) signals on the same "
            "stream; events order different streams (a wrong stream "
            "assignment?)");
}

//===--- 6. Happens-before ------------------------------------------------===//

/// A on compute reads 'a' at gpu [128, 256); then B on h2d fills 'b', which
/// reuses those bytes once 'a' is dead.
PlanBuilder reuseAcrossStreams(bool withEvent) {
  PlanBuilder b;
  b.tier(TIER_CPU, 0, 1024);
  int a = b.tensor("a", TIER_GPU, 128, 32, ROLE_ACTIVATION);
  int c = b.tensor("c", TIER_GPU, 0, 32, ROLE_STATE);
  int bc = b.tensor("b.cpu", TIER_CPU, 0, 32, ROLE_PARAMETER);
  int bg = b.tensor("b", TIER_GPU, 128, 32);
  int d = b.tensor("d", TIER_GPU, 256, 32, ROLE_STATE);
  int ac = b.tensor("a.cpu", TIER_CPU, 128, 32, ROLE_PARAMETER);
  std::vector<uint32_t> none;
  b.inst("P", "zinc.Copy", STREAM_H2D, {ac}, {a}, none, {2});
  b.inst("A", "Relu", STREAM_COMPUTE, {a}, {c}, {2}, {0});
  b.inst("B", "zinc.Copy", STREAM_H2D, {bc}, {bg},
         withEvent ? std::vector<uint32_t>{0} : none, {1});
  b.inst("C", "Relu", STREAM_COMPUTE, {bg}, {d}, {1});
  return b;
}

TEST(PlanVerifierTest, ConflictingAccessesOnTwoStreamsNeedAnEvent) {
  EXPECT_EQ(verifyError(reuseAcrossStreams(true).p), "");
  EXPECT_EQ(verifyError(reuseAcrossStreams(false).p),
            "plan verifier: node 'B' on h2d writes bytes [128, 256) of the gpu "
            "tier that "
            "node 'A' on compute read, with no event ordering them (tensor 'b' "
            "and tensor "
            "'a')");
}

TEST(PlanVerifierTest, ReadsAfterAnUnorderedWriteAreReported) {
  PlanBuilder b = offloadedLayer();
  b.p.mutable_instructions(1)
      ->clear_wait_events(); // Mul_0 no longer waits on the copy
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: node 'Mul_0' on compute reads bytes [64, 128) "
            "of the gpu tier that node 'fetch_w' on h2d wrote, with no "
            "event ordering them (tensor 'w.gpu')");
}

TEST(PlanVerifierTest, InPlaceUpdatesAreWrites) {
  // The host step updates w and y.cpu in place. It waits on the offload,
  // which waits on Mul_0, which waits on fetch_w: ordered transitively.
  PlanBuilder b = offloadedLayer();
  EXPECT_EQ(verifyError(b.p), "");
  // Without its wait it may update w while fetch_w still reads it.
  b.p.mutable_instructions(3)->clear_wait_events();
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: node 'update' on host writes bytes [0, 64) "
            "of the cpu tier that node 'fetch_w' on h2d read, with no "
            "event ordering them (tensor 'w')");
  // Waiting on Mul_0 orders it after fetch_w but not after the offload,
  // which may still be writing y.cpu.
  b.p.mutable_instructions(3)->add_wait_events(1);
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: node 'update' on host writes bytes [64, 128) "
            "of the cpu tier that node 'offload_y' on d2h wrote, with no "
            "event ordering them (tensor 'y.cpu')");
}

TEST(PlanVerifierTest, ConcurrentReadsAndCopyIntoSourcesDoNotConflict) {
  PlanBuilder b;
  b.tier(TIER_CPU, 0, 1024);
  int x = b.tensor("x", TIER_GPU, 0, 16, ROLE_INPUT);
  int act = b.tensor("act", TIER_GPU, 64, 16);
  int saved = b.tensor("act.saved", TIER_CPU, 0, 16, ROLE_STATE);
  int y = b.tensor("y", TIER_GPU, 128, 16, ROLE_STATE);
  b.inst("Relu_0", "Relu", STREAM_COMPUTE, {x}, {act}, {}, {0});
  // Offload act while compute keeps reading it: both only read it.
  b.inst("offload", "zinc.CopyInto", STREAM_D2H, {act, saved}, {}, {0});
  b.inst("Relu_1", "Relu", STREAM_COMPUTE, {act}, {y});
  EXPECT_EQ(verifyError(b.p), "");
  // Writing act in place while the offload reads it is a race.
  b.inst("Scale_2", "zinc.ScaleInPlace", STREAM_COMPUTE, {act}, {});
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: node 'Scale_2' on compute writes bytes "
            "[64, 128) of the gpu tier that node 'offload' on d2h read, "
            "with no event ordering them (tensor 'act')");
}

TEST(PlanVerifierTest, PartialOverlapsNameTheSharedBytes) {
  PlanBuilder b;
  b.tier(TIER_CPU, 0, 1024);
  int big = b.tensor("big", TIER_GPU, 0, 64); // [0, 256)
  int out = b.tensor("out", TIER_GPU, 256, 1, ROLE_STATE);
  int src = b.tensor("src", TIER_CPU, 0, 16, ROLE_PARAMETER);
  int small = b.tensor("small", TIER_GPU, 192, 16); // [192, 256)
  int bigc = b.tensor("big.cpu", TIER_CPU, 256, 64, ROLE_PARAMETER);
  b.inst("fetch_big", "zinc.Copy", STREAM_H2D, {bigc}, {big}, {}, {1});
  b.inst("Reduce", "ReduceSum", STREAM_COMPUTE, {big}, {out}, {1}, {0});
  b.inst("fetch", "zinc.Copy", STREAM_H2D, {src}, {small});
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: node 'fetch' on h2d writes bytes [192, 256) "
            "of the gpu tier that node 'Reduce' on compute read, with no "
            "event ordering them (tensor 'small' and tensor 'big')");
  b.p.mutable_instructions(2)->add_wait_events(0);
  EXPECT_EQ(verifyError(b.p), "");
}

TEST(PlanVerifierTest, OneStreamIsOrderedByPlanOrder) {
  PlanBuilder b;
  int x = b.tensor("x", TIER_GPU, 0, 16, ROLE_INPUT);
  int h = b.tensor("h", TIER_GPU, 64, 16);
  int y = b.tensor("y", TIER_GPU, 128, 16, ROLE_STATE);
  b.inst("Relu_0", "Relu", STREAM_COMPUTE, {x}, {h});
  b.inst("Relu_1", "Relu", STREAM_COMPUTE, {h}, {y});
  b.inst("Relu_2", "Relu", STREAM_COMPUTE, {y}, {h});
  EXPECT_EQ(verifyError(b.p), "");
}

//===--- Scale ------------------------------------------------------------===//

/// A layered prefetch pipeline: per layer a CPU weight, a GPU staging buffer
/// (two slots, refilled by h2d once compute is done with the slot) and an
/// activation (two slots), 3 tensors and 2 instructions and events each.
static PlanBuilder pipeline(int layers) {
  PlanBuilder b;
  const uint64_t bytes = 256;
  b.tier(TIER_CPU, 0, bytes * layers);
  b.tier(TIER_GPU, 0, bytes * 5);
  b.p.mutable_tensors()->Reserve(3 * layers + 1);
  b.p.mutable_instructions()->Reserve(2 * layers);
  int x = b.tensor("x", TIER_GPU, 0, 64, ROLE_INPUT);
  std::vector<int> weight(layers), staged(layers), act(layers);
  for (int i = 0; i < layers; ++i) {
    std::string n = std::to_string(i);
    weight[i] = b.tensor("w" + n, TIER_CPU, bytes * i, 64, ROLE_PARAMETER);
    staged[i] = b.tensor("w" + n + ".gpu", TIER_GPU, bytes * (1 + i % 2), 64);
    act[i] = b.tensor("a" + n, TIER_GPU, bytes * (3 + i % 2), 64);
  }
  b.p.add_outputs(act[layers - 1]);
  // Events: 2i = layer i's weight is on the GPU, 2i+1 = layer i is done.
  auto fetch = [&](int i) {
    std::vector<uint32_t> waits;
    if (i >= 2)
      waits.push_back(2 * (i - 2) + 1);
    b.inst("fetch_" + std::to_string(i), "zinc.Copy", STREAM_H2D, {weight[i]},
           {staged[i]}, waits, {static_cast<uint32_t>(2 * i)});
  };
  fetch(0);
  for (int i = 0; i < layers; ++i) {
    if (i + 1 < layers)
      fetch(i + 1);
    b.inst("MatMul_" + std::to_string(i), "MatMul", STREAM_COMPUTE,
           {i ? act[i - 1] : x, staged[i]}, {act[i]},
           {static_cast<uint32_t>(2 * i)}, {static_cast<uint32_t>(2 * i + 1)});
  }
  return b;
}

TEST(PlanVerifierTest, APipelineOf50kTensorsVerifiesQuickly) {
  PlanBuilder b = pipeline(17000);
  ASSERT_GT(b.p.tensors_size(), 50000);
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(verifyError(b.p), "");
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  RecordProperty("verify_ms", static_cast<int>(seconds * 1000));
  EXPECT_LT(seconds, 1.0);
  // Prefetching layer 9000 before compute is done with its slot (layer 8998)
  // is found, too.
  Instruction &fetch = *b.p.mutable_instructions(2 * 9000 - 1);
  ASSERT_EQ(fetch.name(), "fetch_9000");
  fetch.clear_wait_events();
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: node 'fetch_9000' on h2d writes bytes "
            "[256, 512) of the gpu tier that node 'MatMul_8998' on "
            "compute read, with no event ordering them (tensor "
            "'w9000.gpu' and tensor 'w8998.gpu')");
  // A plan this big checks memory and ordering side by side; with both
  // broken, the memory failure (first in check order) is the one reported.
  int a9000 = 3 * 9000 + 1 + 2;
  ASSERT_EQ(b.p.tensors(a9000).name(), "a9000");
  b.p.mutable_tensors(a9000)->set_offset(256 * 4);
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: tensors 'a8999' [1024, 1280) and 'a9000' "
            "[1024, 1280) of the gpu tier overlap and are both live at node "
            "'MatMul_9000' (MatMul)");
}
