//===- PlanVerifierValueTest.cpp - What the bytes a plan reads hold ------===//
//
// Checks 6 and 7 of the plan verifier on what a plan holds rather than
// when: each read finds bytes written for its own tensor, each update of a
// staged copy is written back. A valid offloaded step is mutated the way a
// compiler bug would (a prefetch, a write-back or an event lost, a read of a
// buffer nothing fills) and each mutation is refused naming the instruction.
//
//===----------------------------------------------------------------------===//
#include "PlanBuilder.h"

using namespace zinc::plan;
using zinc::plan::test::PlanBuilder;
using zinc::plan::test::verifyError;

namespace {

int instructionNamed(const Plan &p, llvm::StringRef name) {
  for (int i = 0; i < p.instructions_size(); ++i)
    if (p.instructions(i).name() == name)
      return i;
  ADD_FAILURE() << "no instruction " << name.str();
  return 0;
}

/// Drops instruction `name` as if the compiler had never emitted it: the
/// waits on its events go too, and the events left are renumbered densely.
void deleteInstruction(Plan &p, llvm::StringRef name) {
  int at = instructionNamed(p, name);
  const Instruction &gone = p.instructions(at);
  std::vector<bool> dropped(p.num_events(), false);
  for (uint32_t e : gone.signal_events())
    dropped[e] = true;
  p.mutable_instructions()->DeleteSubrange(at, 1);
  std::vector<uint32_t> renumbered(p.num_events());
  uint32_t next = 0;
  for (uint32_t e = 0; e < p.num_events(); ++e)
    if (!dropped[e])
      renumbered[e] = next++;
  for (Instruction &inst : *p.mutable_instructions()) {
    std::vector<uint32_t> waits;
    for (uint32_t e : inst.wait_events())
      if (!dropped[e])
        waits.push_back(renumbered[e]);
    inst.clear_wait_events();
    for (uint32_t e : waits)
      inst.add_wait_events(e);
    for (uint32_t &e : *inst.mutable_signal_events())
      e = renumbered[e];
  }
  p.set_num_events(next);
}

/// One SGD step of an offloaded weight, as insert-transfers lays it out
/// under --offload-optimizer=nvme --offload-params=cpu: compute reads a
/// prefetched GPU copy of the CPU weights w.cpu; the gradient leaves for
/// the CPU; the master w is staged from NVMe, updated on the host, written
/// back to NVMe and copied into w.cpu for the next step.
PlanBuilder offloadedStep() {
  PlanBuilder b;
  b.tier(TIER_CPU, 0, 1024);
  b.tier(TIER_NVME, 0, 4096, 4096);
  int x = b.tensor("x", TIER_GPU, 0, 16, ROLE_INPUT);      // gpu [0, 64)
  int w = b.tensor("w", TIER_NVME, 0, 16, ROLE_PARAMETER); // nvme
  int wc = b.tensor("w.cpu", TIER_CPU, 0, 16, ROLE_STATE); // cpu [0, 64)
  int wg = b.tensor("w.cpu@gpu", TIER_GPU, 64, 16);        // gpu [64, 128)
  int y = b.tensor("y", TIER_GPU, 128, 16);                // gpu [128, 192)
  int g = b.tensor("g", TIER_GPU, 192, 16);                // gpu [192, 256)
  int gc = b.tensor("g@cpu", TIER_CPU, 64, 16);            // cpu [64, 128)
  int staged = b.tensor("w@cpu", TIER_CPU, 128, 16);       // cpu [128, 192)
  b.p.add_outputs(y);
  b.inst("fetch", "zinc.Copy", STREAM_H2D, {wc}, {wg}, {}, {0});
  b.inst("Mul_0", "Mul", STREAM_COMPUTE, {x, wg}, {y}, {0});
  b.inst("Grad_1", "Mul", STREAM_COMPUTE, {y, x}, {g}, {}, {1});
  b.inst("offload_g", "zinc.Copy", STREAM_D2H, {g}, {gc}, {1}, {2});
  b.inst("stage", "zinc.Copy", STREAM_NVME, {w}, {staged}, {}, {3});
  b.inst("update", "zinc.SGD", STREAM_HOST, {staged, gc}, {}, {2, 3}, {4});
  b.inst("writeback", "zinc.CopyInto", STREAM_NVME, {staged, w}, {}, {4});
  b.inst("refresh", "zinc.CopyInto", STREAM_HOST, {staged, wc}, {}, {0});
  return b;
}

} // namespace

TEST(PlanVerifierValueTest, AcceptsAnOffloadedStep) {
  EXPECT_EQ(verifyError(offloadedStep().p), "");
}

//===--- Every read finds its tensor's bytes written ----------------------===//

TEST(PlanVerifierValueTest, ADeletedPrefetchIsReported) {
  PlanBuilder b = offloadedStep();
  deleteInstruction(b.p, "fetch");
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: node 'Mul_0' (Mul) on the compute stream reads "
            "tensor 'w.cpu@gpu' which nothing writes before it (a missing "
            "producer or prefetch?)");
  b = offloadedStep();
  deleteInstruction(b.p, "stage");
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: node 'update' (zinc.SGD) on the host stream "
            "updates tensor 'w@cpu' which nothing writes before it (a "
            "missing producer or prefetch?)");
}

/// Two layers' weights prefetched in turn into one GPU slot.
PlanBuilder sharedSlot() {
  PlanBuilder b;
  b.tier(TIER_CPU, 0, 1024);
  int x = b.tensor("x", TIER_GPU, 0, 16, ROLE_INPUT);
  int w0 = b.tensor("w0", TIER_CPU, 0, 16, ROLE_PARAMETER);
  int w1 = b.tensor("w1", TIER_CPU, 64, 16, ROLE_PARAMETER);
  int s0 = b.tensor("w0.gpu", TIER_GPU, 64, 16); // the slot, [64, 128)
  int s1 = b.tensor("w1.gpu", TIER_GPU, 64, 16);
  int h = b.tensor("h", TIER_GPU, 128, 16);
  int y = b.tensor("y", TIER_GPU, 192, 16);
  b.p.add_outputs(y);
  b.inst("fetch_0", "zinc.Copy", STREAM_H2D, {w0}, {s0}, {}, {0});
  b.inst("Mul_0", "Mul", STREAM_COMPUTE, {x, s0}, {h}, {0}, {1});
  b.inst("fetch_1", "zinc.Copy", STREAM_H2D, {w1}, {s1}, {1}, {2});
  b.inst("Mul_1", "Mul", STREAM_COMPUTE, {h, s1}, {y}, {2});
  return b;
}

TEST(PlanVerifierValueTest, APrefetchDeletedIntoReusedBytesIsReported) {
  EXPECT_EQ(verifyError(sharedSlot().p), "");
  // The slot still holds layer 0's weight: the bytes were written, but not
  // for the tensor Mul_1 reads.
  PlanBuilder b = sharedSlot();
  deleteInstruction(b.p, "fetch_1");
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: node 'Mul_1' (Mul) on the compute stream reads "
            "tensor 'w1.gpu' whose bytes [64, 128) of the gpu tier were last "
            "written for tensor 'w0.gpu' by node 'fetch_0'; nothing writes "
            "tensor 'w1.gpu' before it (a missing producer or prefetch?)");
}

TEST(PlanVerifierValueTest, ATransientNothingWritesIsReported) {
  PlanBuilder b = offloadedStep();
  int scratch = b.tensor("scratch", TIER_GPU, 256, 16);
  b.p.mutable_instructions(instructionNamed(b.p, "Grad_1"))
      ->set_inputs(1, scratch);
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: node 'Grad_1' (Mul) on the compute stream reads "
            "tensor 'scratch' which nothing writes before it (a missing "
            "producer or prefetch?)");
  // An in-place update reads what it updates.
  b = offloadedStep();
  scratch = b.tensor("scratch", TIER_GPU, 256, 16);
  b.inst("AllReduce_2", "zinc.AllReduce", STREAM_COLLECTIVE, {scratch}, {});
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: node 'AllReduce_2' (zinc.AllReduce) on the "
            "collective stream updates tensor 'scratch' which nothing writes "
            "before it (a missing producer or prefetch?)");
}

TEST(PlanVerifierValueTest, WhatNeedsNoWriteIsAccepted) {
  PlanBuilder b = offloadedStep();
  // Absent optional inputs, and zero-sized tensors (no bytes to hold).
  b.p.mutable_instructions(instructionNamed(b.p, "Mul_0"))->add_inputs(-1);
  int empty = b.tensor("empty", TIER_GPU, 256, 0);
  int relu = b.tensor("relu", TIER_GPU, 320, 0);
  b.inst("Relu_2", "Relu", STREAM_COMPUTE, {empty}, {relu});
  EXPECT_EQ(verifyError(b.p), "");
  // A CopyInto's destination is overwritten, not read.
  b = offloadedStep();
  int saved = b.tensor("y.saved", TIER_CPU, 192, 16);
  b.p.add_outputs(saved);
  b.inst("save_y", "zinc.CopyInto", STREAM_D2H, {4 /* y */, saved}, {});
  EXPECT_EQ(verifyError(b.p), "");
}

TEST(PlanVerifierValueTest, GraphOutputsAreWrittenInTheStep) {
  PlanBuilder b = offloadedStep();
  b.p.add_outputs(b.tensor("z", TIER_GPU, 256, 16));
  EXPECT_EQ(verifyError(b.p), "plan verifier: graph output tensor 'z' is "
                              "read after the step, but nothing writes it");
  b = offloadedStep();
  b.p.set_loss(b.tensor("loss", TIER_GPU, 256, 1));
  EXPECT_EQ(verifyError(b.p), "plan verifier: the loss tensor 'loss' is "
                              "read after the step, but nothing writes it");
}

//===--- Updates of staged copies reach their homes -----------------------===//

TEST(PlanVerifierValueTest, ADeletedWriteBackIsReported) {
  PlanBuilder b = offloadedStep();
  deleteInstruction(b.p, "writeback");
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: node 'update' (zinc.SGD) updates tensor 'w@cpu', "
            "a copy of tensor 'w' in the nvme tier, but no write-back "
            "reaches tensor 'w' before the step ends");
}

TEST(PlanVerifierValueTest, ReadingAHomeBeforeItsWriteBackIsReported) {
  // The refresh reads the master from NVMe once it is written back.
  PlanBuilder b = offloadedStep();
  Instruction &refresh =
      *b.p.mutable_instructions(instructionNamed(b.p, "refresh"));
  refresh.set_inputs(0, 1); // w
  refresh.set_stream(STREAM_NVME);
  EXPECT_EQ(verifyError(b.p), "");
  // Before it, it would copy the old weights.
  std::swap(*b.p.mutable_instructions(instructionNamed(b.p, "writeback")),
            *b.p.mutable_instructions(instructionNamed(b.p, "refresh")));
  b.p.mutable_instructions(instructionNamed(b.p, "refresh"))
      ->add_wait_events(4);
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: node 'refresh' (zinc.CopyInto) on the nvme "
            "stream reads tensor 'w', which is stale: node 'update' "
            "(zinc.SGD) updated its copy tensor 'w@cpu' and no write-back "
            "reaches tensor 'w' in between (a missing write-back?)");
}

TEST(PlanVerifierValueTest, AWriteBackFollowsCopiesOfTheUpdate) {
  // A GPU update of an NVMe home goes back through the CPU: Copy d2h, then
  // CopyInto to NVMe; the value follows both.
  PlanBuilder b;
  b.tier(TIER_CPU, 0, 1024);
  b.tier(TIER_NVME, 0, 4096, 4096);
  int m = b.tensor("m", TIER_NVME, 0, 16, ROLE_STATE);
  int mc = b.tensor("m@cpu", TIER_CPU, 0, 16);
  int mg = b.tensor("m@gpu", TIER_GPU, 0, 16);
  int back = b.tensor("m@gpu@cpu", TIER_CPU, 64, 16);
  b.inst("stage", "zinc.Copy", STREAM_NVME, {m}, {mc}, {}, {0});
  b.inst("fetch", "zinc.Copy", STREAM_H2D, {mc}, {mg}, {0}, {1});
  b.inst("Scale_0", "zinc.ScaleInPlace", STREAM_COMPUTE, {mg}, {}, {1}, {2});
  b.inst("evict", "zinc.Copy", STREAM_D2H, {mg}, {back}, {2}, {3});
  b.inst("writeback", "zinc.CopyInto", STREAM_NVME, {back, m}, {}, {3});
  EXPECT_EQ(verifyError(b.p), "");
  // Writing back the staged copy instead stores the old value.
  b.p.mutable_instructions(4)->set_inputs(0, mc);
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: node 'Scale_0' (zinc.ScaleInPlace) updates "
            "tensor 'm@gpu', a copy of tensor 'm' in the nvme tier, but no "
            "write-back reaches tensor 'm' before the step ends");
}

TEST(PlanVerifierValueTest, UpdatingAStaleCopyIsReported) {
  // A second staged copy of w, taken before the first was updated: its
  // update would overwrite the first one's.
  PlanBuilder b = offloadedStep();
  int again = b.tensor("w@cpu.1", TIER_CPU, 192, 16);
  b.inst("stage_again", "zinc.Copy", STREAM_NVME, {1 /* w */}, {again}, {},
         {5});
  // Right after the first staging, before the update.
  for (int k = b.p.instructions_size() - 1;
       k > instructionNamed(b.p, "stage") + 1; --k)
    b.p.mutable_instructions()->SwapElements(k, k - 1);
  b.inst("update_again", "zinc.SGD", STREAM_HOST, {again, 6 /* g@cpu */}, {},
         {5});
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: node 'update_again' (zinc.SGD) on the host "
            "stream updates tensor 'w@cpu.1', a copy of tensor 'w' taken "
            "before node 'update' (zinc.SGD) updated tensor 'w@cpu'; one of "
            "the two updates is lost");
}

TEST(PlanVerifierValueTest, FreshBytesStoredIntoAHomeMakeItCurrent) {
  // BatchNorm's running mean: computed in the step and stored into the
  // model state; and a direct in-place update of a home.
  PlanBuilder b;
  int x = b.tensor("x", TIER_GPU, 0, 16, ROLE_INPUT);
  int stat = b.tensor("running_mean", TIER_GPU, 64, 16, ROLE_MODEL_STATE);
  int mean = b.tensor("batch_mean", TIER_GPU, 128, 16);
  int w = b.tensor("w", TIER_GPU, 192, 16, ROLE_PARAMETER);
  b.inst("BN_0", "ReduceMean", STREAM_COMPUTE, {x, stat}, {mean});
  b.inst("update_stat", "zinc.CopyInto", STREAM_COMPUTE, {mean, stat}, {});
  b.inst("w/sgd", "zinc.SGD", STREAM_COMPUTE, {w, x}, {});
  EXPECT_EQ(verifyError(b.p), "");
}

//===--- Events ---------------------------------------------------------===//

TEST(PlanVerifierValueTest, ADeletedEventIsReported) {
  PlanBuilder b = offloadedStep();
  b.p.mutable_instructions(instructionNamed(b.p, "Mul_0"))->clear_wait_events();
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: node 'Mul_0' on compute reads bytes [64, 128) of "
            "the gpu tier that node 'fetch' on h2d wrote, with no event "
            "ordering them (tensor 'w.cpu@gpu')");
  b = offloadedStep();
  b.p.mutable_instructions(instructionNamed(b.p, "writeback"))
      ->clear_wait_events();
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: node 'writeback' on nvme reads bytes [128, 192) "
            "of the cpu tier that node 'update' on host wrote, with no event "
            "ordering them (tensor 'w@cpu')");
}

TEST(PlanVerifierValueTest, AReorderedEventIsReported) {
  // The prefetch moved after the compute that waits on it.
  PlanBuilder b = offloadedStep();
  b.p.mutable_instructions()->SwapElements(0, 1);
  EXPECT_EQ(verifyError(b.p),
            "plan verifier: node 'Mul_0' (Mul) on the compute stream waits on "
            "event 0, which node 'fetch' (zinc.Copy) signals later");
}
