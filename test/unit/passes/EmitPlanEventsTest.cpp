//===- EmitPlanEventsTest.cpp - Events order every conflicting access -----===//
#include "zinc/ir/Parser.h"
#include "zinc/passes/EmitPlan.h"
#include "zinc/plan/PlanVerifier.h"
#include "gtest/gtest.h"

using namespace zinc;

namespace {

plan::Plan emit(llvm::StringRef text) {
  auto graph = ir::parseGraph(text, "test.zir");
  EXPECT_TRUE(static_cast<bool>(graph)) << llvm::toString(graph.takeError());
  auto p = emitPlan(**graph, EmitOptions());
  EXPECT_TRUE(static_cast<bool>(p)) << llvm::toString(p.takeError());
  llvm::Error err = plan::verifyPlan(*p);
  EXPECT_FALSE(static_cast<bool>(err)) << llvm::toString(std::move(err));
  return std::move(*p);
}

int find(const plan::Plan &p, llvm::StringRef name) {
  for (int i = 0; i < p.instructions_size(); ++i)
    if (p.instructions(i).name() == name)
      return i;
  ADD_FAILURE() << "no instruction " << name.str();
  return -1;
}

/// The instructions whose events `name` waits on, by name.
std::vector<std::string> waitsOn(const plan::Plan &p, llvm::StringRef name) {
  std::vector<std::string> from;
  for (uint32_t e : p.instructions(find(p, name)).wait_events())
    for (const plan::Instruction &inst : p.instructions())
      if (llvm::is_contained(inst.signal_events(), e))
        from.push_back(inst.name());
  return from;
}

using Names = std::vector<std::string>;

} // namespace

TEST(EmitPlanEventsTest, ConflictsFarBackAreFound) {
  // The fetches' readers come long after them; everything between touches
  // other bytes, so only the readers wait, each on its own fetch.
  plan::Plan p = emit(R"(graph "far" {
  input %x : f32[16]
  param %w0 : f32[16] in cpu init "w0"
  param %w1 : f32[16] in cpu init "w1"
  %g0 : f32[16] = zinc.Copy(%w0) name "fetch0" on h2d
  %g1 : f32[16] = zinc.Copy(%w1) name "fetch1" on h2d
  %a1 : f32[16] = Relu(%x) name "r1"
  %a2 : f32[16] = Relu(%a1) name "r2"
  %a3 : f32[16] = Relu(%a2) name "r3"
  %a4 : f32[16] = Relu(%a3) name "r4"
  %b0 : f32[16] = Add(%a4, %g0) name "use0"
  %b1 : f32[16] = Add(%b0, %g1) name "use1"
  %h : f32[16] in cpu = zinc.Copy(%b1) name "save" on d2h
  output %h
})");
  for (const char *r : {"r1", "r2", "r3", "r4"})
    EXPECT_EQ(waitsOn(p, r), Names()) << r;
  EXPECT_EQ(waitsOn(p, "use0"), Names({"fetch0"}));
  EXPECT_EQ(waitsOn(p, "use1"), Names({"fetch1"}));
  EXPECT_EQ(waitsOn(p, "save"), Names({"use1"}));
  EXPECT_EQ(p.num_events(), 3u);
}

TEST(EmitPlanEventsTest, AStreamAlreadyWaitedPastIsNotWaitedOnAgain) {
  // use1 reads both fetches; waiting on the later one orders the earlier
  // one too (the h2d stream runs in order).
  plan::Plan p = emit(R"(graph "past" {
  input %x : f32[16]
  param %w0 : f32[16] in cpu init "w0"
  param %w1 : f32[16] in cpu init "w1"
  %g0 : f32[16] = zinc.Copy(%w0) name "fetch0" on h2d
  %g1 : f32[16] = zinc.Copy(%w1) name "fetch1" on h2d
  %b0 : f32[16] = Add(%g0, %g1) name "use"
  output %b0
})");
  EXPECT_EQ(waitsOn(p, "use"), Names({"fetch1"}));
  EXPECT_EQ(p.num_events(), 1u);
}

TEST(EmitPlanEventsTest, ReusedBytesWaitForTheLastReader) {
  // %b takes the bytes %a had (the arena reuses them once %a is dead), so
  // writing %b must wait for the copy that read %a out on another stream.
  plan::Plan p = emit(R"(graph "reuse" {
  input %x : f32[256]
  %a : f32[256] = Relu(%x) name "make"
  %s : f32[256] in cpu = zinc.Copy(%a) name "evict" on d2h
  %b : f32[256] = Neg(%x) name "next"
  %c : f32[256] = Relu(%b) name "last"
  output %s
  output %c
})");
  auto offsetOf = [&](llvm::StringRef name) {
    for (const plan::Tensor &t : p.tensors())
      if (t.name() == name)
        return t.offset();
    ADD_FAILURE() << "no tensor " << name.str();
    return uint64_t(0);
  };
  ASSERT_EQ(offsetOf("a"), offsetOf("b")) << "the case needs the bytes reused";
  EXPECT_EQ(waitsOn(p, "evict"), Names({"make"}));
  EXPECT_EQ(waitsOn(p, "next"), Names({"evict"}));
}
