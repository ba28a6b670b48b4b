//===- BucketCollectivesTest.cpp - Merging collectives into buckets -------===//
#include "zinc/passes/BucketCollectives.h"
#include "zinc/ir/Parser.h"
#include "zinc/ir/Verifier.h"
#include "gtest/gtest.h"
#include <string>
#include <vector>

using namespace zinc;

namespace {

/// Each node as "name(inputs)", in order.
struct Bucketed {
  std::vector<std::string> nodes;
  size_t merged = 0;
};

Bucketed bucket(const std::string &body, uint64_t cap) {
  std::string text = R"(graph "g" ranks 2 {
  param %a : f32[64] shard of [128] init "a"
  param %b : f32[64] shard of [128] init "b"
  param %c : f32[64] shard of [128] init "c"
  param %big : f32[4096] shard of [8192] init "big"
  input %x : f32[128]
)" + body + "}\n";
  auto graph = ir::parseGraph(text, "test.zir");
  EXPECT_TRUE(static_cast<bool>(graph)) << llvm::toString(graph.takeError());
  Bucketed r;
  r.merged = passes::bucketCollectives(**graph, cap);
  if (llvm::Error err = ir::verifyGraph(**graph))
    ADD_FAILURE() << llvm::toString(std::move(err));
  for (const ir::Node *n : (*graph)->nodes()) {
    std::string text = n->opType + "(";
    for (size_t i = 0; i < n->inputs.size(); ++i)
      text += (i ? "," : "") + n->inputs[i]->name;
    r.nodes.push_back(text + ")");
  }
  return r;
}

using Names = std::vector<std::string>;

} // namespace

TEST(BucketCollectivesTest, GathersMergeAtTheFirstUpToTheCap) {
  // 512 bytes each whole: a cap of 1 KiB holds two; the 32 KiB gather is
  // larger than the cap and stays alone.
  std::string body = R"(
  %A : f32[128] = zinc.AllGather(%a) name "ga" on collective
  %y1 : f32[128] = Add(%x, %A)
  %B : f32[128] = zinc.AllGather(%b) name "gb" on collective
  %y2 : f32[128] = Add(%y1, %B)
  %C : f32[128] = zinc.AllGather(%c) name "gc" on collective
  %y3 : f32[128] = Add(%y2, %C)
  %BIG : f32[8192] = zinc.AllGather(%big) name "gbig" on collective
  output %y3
  output %BIG
)";
  Bucketed r = bucket(body, 1024);
  EXPECT_EQ(r.merged, 1u);
  EXPECT_EQ(r.nodes, (Names{"AllGather(a,b)", "Add(x,A)", "Add(y1,B)", "AllGather(c)",
                            "Add(y2,C)", "AllGather(big)"}));
  // A cap of 0 leaves the graph alone.
  EXPECT_EQ(bucket(body, 0).merged, 0u);
}

TEST(BucketCollectivesTest, AGatherWaitsForItsShardToBeComplete) {
  // b's shard is written in place after the first gather: gathering it
  // there would send the old values.
  Bucketed r = bucket(R"(
  %A : f32[128] = zinc.AllGather(%a) name "ga" on collective
  %y1 : f32[128] = Add(%x, %A)
  zinc.AllReduce(%b) name "touch-b" on collective {op = "max" : string}
  %B : f32[128] = zinc.AllGather(%b) name "gb" on collective
  %y2 : f32[128] = Add(%y1, %B)
  output %y2
)", 1 << 20);
  EXPECT_EQ(r.merged, 0u);
  EXPECT_EQ(r.nodes[0], "AllGather(a)");
}

TEST(BucketCollectivesTest, AGatherOfACollectivesResultStaysBehindIt) {
  // ar-b and ar-c merge at ar-c; gb reads what ar-b writes, so it must not
  // move up to ga, ahead of the bucket that now writes b.
  Bucketed r = bucket(R"(
  zinc.AllReduce(%b) name "ar-b" on collective {op = "sum" : string}
  %A : f32[128] = zinc.AllGather(%a) name "ga" on collective
  %y1 : f32[128] = Add(%x, %A)
  zinc.AllReduce(%c) name "ar-c" on collective {op = "sum" : string}
  %B : f32[128] = zinc.AllGather(%b) name "gb" on collective
  %y2 : f32[128] = Add(%y1, %B)
  output %y2
)", 1 << 20);
  EXPECT_EQ(r.merged, 1u);
  EXPECT_EQ(r.nodes, (Names{"AllGather(a)", "Add(x,A)", "AllReduce(b,c)", "AllGather(b)",
                            "Add(y1,B)"}));
}

TEST(BucketCollectivesTest, ReductionsMergeAtTheLastBeforeTheirResultsAreRead) {
  // Gradients reduce-scattered as they complete: the first two wait for
  // the second; the third's bucket closes when the second's shard is read.
  Bucketed r = bucket(R"(
  %g1 : f32[128] = Add(%x, %x)
  %s1 : f32[64] shard of [128] = zinc.ReduceScatter(%g1) name "rs1" on collective {op = "mean" : string}
  %g2 : f32[128] = Mul(%x, %x)
  %s2 : f32[64] shard of [128] = zinc.ReduceScatter(%g2) name "rs2" on collective {op = "mean" : string}
  %u : f32[64] = Add(%s2, %a)
  %g3 : f32[128] = Sub(%x, %x)
  %s3 : f32[64] shard of [128] = zinc.ReduceScatter(%g3) name "rs3" on collective {op = "mean" : string}
  %g4 : f32[128] = Div(%x, %x)
  %s4 : f32[64] shard of [128] = zinc.ReduceScatter(%g4) name "rs4" on collective {op = "sum" : string}
  output %s1
  output %u
  output %s3
  output %s4
)", 1 << 20);
  EXPECT_EQ(r.merged, 1u);
  // rs3 is alone in its bucket: rs4 reduces with another op.
  EXPECT_EQ(r.nodes, (Names{"Add(x,x)", "Mul(x,x)", "ReduceScatter(g1,g2)", "Add(s2,a)",
                            "Sub(x,x)", "ReduceScatter(g3)", "Div(x,x)", "ReduceScatter(g4)"}));
}

TEST(BucketCollectivesTest, AnInPlaceReductionWaitsOnlyWhileNothingTouchesItsTensor) {
  // AllReduce writes its tensor in place: a reader of g1 between the two
  // keeps them apart; a reader only of unrelated values does not.
  Bucketed apart = bucket(R"(
  %g1 : f32[128] = Add(%x, %x)
  zinc.AllReduce(%g1) name "ar1" on collective {op = "mean" : string}
  %r : f32[128] = Neg(%g1)
  %g2 : f32[128] = Mul(%x, %x)
  zinc.AllReduce(%g2) name "ar2" on collective {op = "mean" : string}
  output %r
  output %g2
)", 1 << 20);
  EXPECT_EQ(apart.merged, 0u);
  Bucketed together = bucket(R"(
  %g1 : f32[128] = Add(%x, %x)
  zinc.AllReduce(%g1) name "ar1" on collective {op = "mean" : string}
  %r : f32[128] = Neg(%x)
  %g2 : f32[128] = Mul(%x, %x)
  zinc.AllReduce(%g2) name "ar2" on collective {op = "mean" : string}
  %s : f32[128] = Add(%g1, %g2)
  output %r
  output %s
)", 1 << 20);
  EXPECT_EQ(together.merged, 1u);
  EXPECT_EQ(together.nodes, (Names{"Add(x,x)", "Neg(x)", "Mul(x,x)", "AllReduce(g1,g2)",
                                   "Add(g1,g2)"}));
}

TEST(BucketCollectivesTest, StageOnesShardsMoveDownWithTheirAllReduces) {
  // Stage 1: each gradient is all-reduced in place and its share taken at
  // once; the updates read the shares at the end. The ShardOfs move down
  // to just after the bucket, in the members' order.
  Bucketed r = bucket(R"(
  %g1 : f32[128] = Add(%x, %x)
  zinc.AllReduce(%g1) name "ar1" on collective {op = "mean" : string}
  %s1 : f32[64] shard of [128] = zinc.ShardOf(%g1) name "sh1"
  %g2 : f32[128] = Mul(%x, %x)
  zinc.AllReduce(%g2) name "ar2" on collective {op = "mean" : string}
  %s2 : f32[64] shard of [128] = zinc.ShardOf(%g2) name "sh2"
  %g3 : f32[128] = Sub(%x, %x)
  zinc.AllReduce(%g3) name "ar3" on collective {op = "mean" : string}
  %s3 : f32[64] shard of [128] = zinc.ShardOf(%g3) name "sh3"
  %u1 : f32[64] = Add(%s1, %a)
  %u2 : f32[64] = Add(%s2, %b)
  %u3 : f32[64] = Add(%s3, %c)
  output %u1
  output %u2
  output %u3
)", 1 << 20);
  EXPECT_EQ(r.merged, 2u);
  EXPECT_EQ(r.nodes, (Names{"Add(x,x)", "Mul(x,x)", "Sub(x,x)", "AllReduce(g1,g2,g3)",
                            "ShardOf(g1)", "ShardOf(g2)", "ShardOf(g3)", "Add(s1,a)",
                            "Add(s2,b)", "Add(s3,c)"}));
  // A share read at once, or a tensor read between its reduction and its
  // ShardOf, keeps the reductions apart.
  Bucketed readAtOnce = bucket(R"(
  %g1 : f32[128] = Add(%x, %x)
  zinc.AllReduce(%g1) name "ar1" on collective {op = "mean" : string}
  %s1 : f32[64] shard of [128] = zinc.ShardOf(%g1) name "sh1"
  %u1 : f32[64] = Add(%s1, %a)
  %g2 : f32[128] = Mul(%x, %x)
  zinc.AllReduce(%g2) name "ar2" on collective {op = "mean" : string}
  %s2 : f32[64] shard of [128] = zinc.ShardOf(%g2) name "sh2"
  output %u1
  output %s2
)", 1 << 20);
  EXPECT_EQ(readAtOnce.merged, 0u);
  Bucketed readBetween = bucket(R"(
  %g1 : f32[128] = Add(%x, %x)
  zinc.AllReduce(%g1) name "ar1" on collective {op = "mean" : string}
  %n : f32[128] = Neg(%g1)
  %s1 : f32[64] shard of [128] = zinc.ShardOf(%g1) name "sh1"
  %g2 : f32[128] = Mul(%x, %x)
  zinc.AllReduce(%g2) name "ar2" on collective {op = "mean" : string}
  %s2 : f32[64] shard of [128] = zinc.ShardOf(%g2) name "sh2"
  output %n
  output %s1
  output %s2
)", 1 << 20);
  EXPECT_EQ(readBetween.merged, 0u);
}

TEST(BucketCollectivesTest, GathersAfterTheirUpdatesMergeAtTheLast) {
  // Stages 1-2 rebuild each weight right after its update: the second
  // shard is not complete at the first gather, but nothing reads the
  // gathered weights before the last, so the bucket sits there.
  Bucketed r = bucket(R"(
  zinc.AllReduce(%a) name "upd-a" on collective {op = "max" : string}
  %A : f32[128] = zinc.AllGather(%a) name "ga" on collective
  zinc.AllReduce(%b) name "upd-b" on collective {op = "min" : string}
  %B : f32[128] = zinc.AllGather(%b) name "gb" on collective
  output %A
  output %B
)", 1 << 20);
  EXPECT_EQ(r.merged, 1u);
  EXPECT_EQ(r.nodes, (Names{"AllReduce(a)", "AllReduce(b)", "AllGather(a,b)"}));
  // A reader of the first gather's weight before the second keeps them
  // apart.
  Bucketed apart = bucket(R"(
  zinc.AllReduce(%a) name "upd-a" on collective {op = "max" : string}
  %A : f32[128] = zinc.AllGather(%a) name "ga" on collective
  %y : f32[128] = Add(%x, %A)
  zinc.AllReduce(%b) name "upd-b" on collective {op = "min" : string}
  %B : f32[128] = zinc.AllGather(%b) name "gb" on collective
  output %y
  output %B
)", 1 << 20);
  EXPECT_EQ(apart.merged, 0u);
  // Each weight copied into place at once (the refresh) moves down with
  // its gather; a later reader of the copy's destination bounds the bucket.
  Bucketed refreshed = bucket(R"(
  %w1 : f32[128] = Neg(%x)
  %w2 : f32[128] = Abs(%x)
  %A : f32[128] = zinc.AllGather(%a) name "ga" on collective
  zinc.CopyInto(%A, %w1) name "refresh-a"
  zinc.AllReduce(%b) name "upd-b" on collective {op = "min" : string}
  %B : f32[128] = zinc.AllGather(%b) name "gb" on collective
  zinc.CopyInto(%B, %w2) name "refresh-b"
  %y : f32[128] = Add(%w1, %w2)
  output %y
)", 1 << 20);
  EXPECT_EQ(refreshed.merged, 1u);
  EXPECT_EQ(refreshed.nodes, (Names{"Neg(x)", "Abs(x)", "AllReduce(b)", "AllGather(a,b)",
                                    "CopyInto(A,w1)", "CopyInto(B,w2)", "Add(w1,w2)"}));
  Bucketed readFirst = bucket(R"(
  %w1 : f32[128] = Neg(%x)
  %A : f32[128] = zinc.AllGather(%a) name "ga" on collective
  zinc.CopyInto(%A, %w1) name "refresh-a"
  %y : f32[128] = Add(%w1, %x)
  zinc.AllReduce(%b) name "upd-b" on collective {op = "min" : string}
  %B : f32[128] = zinc.AllGather(%b) name "gb" on collective
  output %y
  output %B
)", 1 << 20);
  EXPECT_EQ(readFirst.merged, 0u);
}

TEST(BucketCollectivesTest, FollowersNeverMoveUpNorUnderAGather) {
  // The last member's refresh lies past the anchor, behind a reader of its
  // destination: it stays there (moving it up would let Abs read the new w).
  Bucketed past = bucket(R"(
  %w : f32[128] = Neg(%x)
  %g1 : f32[128] = Add(%x, %x)
  zinc.AllReduce(%g1) name "ar1" on collective {op = "mean" : string}
  %g2 : f32[128] = Mul(%x, %x)
  zinc.AllReduce(%g2) name "ar2" on collective {op = "mean" : string}
  %y : f32[128] = Abs(%w)
  zinc.CopyInto(%g2, %w) name "c2"
  output %y
  output %g1
)", 1 << 20);
  EXPECT_EQ(past.merged, 1u);
  EXPECT_EQ(past.nodes, (Names{"Neg(x)", "Add(x,x)", "Mul(x,x)", "AllReduce(g1,g2)",
                               "Abs(w)", "CopyInto(g2,w)"}));
  // cp may move down with ar1 into its bucket at ar2: gb, which reads what
  // cp writes, must not move up to ga, ahead of it; the gathers meet at gb.
  Bucketed gather = bucket(R"(
  zinc.AllReduce(%c) name "ar1" on collective {op = "mean" : string}
  zinc.CopyInto(%c, %b) name "cp"
  %A : f32[128] = zinc.AllGather(%a) name "ga" on collective
  %g : f32[128] = Add(%x, %x)
  zinc.AllReduce(%g) name "ar2" on collective {op = "mean" : string}
  %B : f32[128] = zinc.AllGather(%b) name "gb" on collective
  output %A
  output %B
  output %g
)", 1 << 20);
  EXPECT_EQ(gather.merged, 2u);
  EXPECT_EQ(gather.nodes, (Names{"Add(x,x)", "AllReduce(c,g)", "CopyInto(c,b)",
                                 "AllGather(a,b)"}));
}

TEST(BucketCollectivesTest, SizesToTryFollowTheLinksLatency) {
  auto hw = loadHardware("dgx2-v100");
  ASSERT_TRUE(static_cast<bool>(hw)) << llvm::toString(hw.takeError());
  // 16 ranks in one DGX-2: 16 x 5 us x 120 GB/s = 9.6 MB at break-even.
  std::vector<uint64_t> sizes = passes::bucketSizesToTry(*hw, 16);
  ASSERT_EQ(sizes.size(), 3u);
  EXPECT_NEAR(static_cast<double>(sizes[0]), 2 * 9.6e6, 1);
  EXPECT_NEAR(static_cast<double>(sizes[2]), 32 * 9.6e6, 16);
  // Across nodes the slower link's latency sets them.
  EXPECT_NEAR(static_cast<double>(passes::bucketSizesToTry(*hw, 32)[0]),
              2 * 32 * 10e-6 * 6.25e9, 1);
  EXPECT_TRUE(passes::bucketSizesToTry(*hw, 1).empty());
}
