//===- GraphTest.cpp - Editing the IR: list order, use lists, deep copy ---===//
#include "zinc/ir/Graph.h"
#include "zinc/ir/Parser.h"
#include "zinc/ir/Printer.h"
#include "zinc/ir/ValueTable.h"
#include "zinc/ir/Verifier.h"
#include "llvm/Support/raw_ostream.h"
#include "gtest/gtest.h"

using namespace zinc;
using namespace zinc::ir;

namespace {

/// Whether the verifier refuses `g`.
bool refused(const Graph &g) {
  llvm::Error err = verifyGraph(g);
  bool failed = bool(err);
  llvm::consumeError(std::move(err));
  return failed;
}

std::string print(const Graph &g) {
  std::string text;
  llvm::raw_string_ostream os(text);
  printGraph(g, os);
  return os.str();
}

std::vector<std::string> order(const Graph &g) {
  std::vector<std::string> names;
  for (Node *n : g.nodes())
    names.push_back(n->name);
  return names;
}

/// The distinct users of `v`, sorted by name.
std::vector<std::string> users(const Value &v) {
  std::vector<std::string> names;
  for (const Use &u : v.uses())
    names.push_back(u.user->name + "#" + std::to_string(u.operand));
  std::sort(names.begin(), names.end());
  return names;
}

struct Chain {
  Graph g;
  Value *x, *a, *b, *c;
  Node *na, *nb, *nc;
  Chain() {
    x = g.addValue("x", DType::F32, {2}, ValueRole::Input);
    g.addInput(x);
    a = g.addValue("a", DType::F32, {2}, ValueRole::Activation);
    b = g.addValue("b", DType::F32, {2}, ValueRole::Activation);
    c = g.addValue("c", DType::F32, {2}, ValueRole::Activation);
    na = g.addNode("Neg", "na", {x}, {a});
    nb = g.addNode("Add", "nb", {a, x}, {b});
    nc = g.addNode("Mul", "nc", {b, b}, {c});
    g.addOutput(c);
  }
};

TEST(Graph, InsertMoveEraseKeepOrder) {
  Chain t;
  Value *d = t.g.addValue("d", DType::F32, {2}, ValueRole::Activation);
  Node *nd = t.g.insertNode(t.nb, "Relu", "nd", {t.a}, {d});
  EXPECT_EQ(order(t.g), (std::vector<std::string>{"na", "nd", "nb", "nc"}));
  EXPECT_EQ(t.g.numNodes(), 4u);
  EXPECT_EQ(t.g.nextNode(t.na), nd);
  EXPECT_EQ(t.g.prevNode(t.nb), nd);
  EXPECT_EQ(t.g.prevNode(t.na), nullptr);
  EXPECT_EQ(t.g.nextNode(t.nc), nullptr);
  t.g.moveBefore(nd, nullptr);
  EXPECT_EQ(order(t.g), (std::vector<std::string>{"na", "nb", "nc", "nd"}));
  EXPECT_EQ(t.g.lastNode(), nd);
  t.g.moveBefore(nd, t.na);
  EXPECT_EQ(t.g.firstNode(), nd);
  t.g.eraseNode(nd);
  EXPECT_EQ(order(t.g), (std::vector<std::string>{"na", "nb", "nc"}));
  EXPECT_EQ(t.g.numNodes(), 3u);
  EXPECT_EQ(d->def, nullptr);
  EXPECT_EQ(users(*t.a), (std::vector<std::string>{"nb#0"})) << "erase drops the uses";
}

TEST(Graph, UseListsFollowEveryEdit) {
  Chain t;
  EXPECT_EQ(users(*t.x), (std::vector<std::string>{"na#0", "nb#1"}));
  EXPECT_EQ(users(*t.b), (std::vector<std::string>{"nc#0", "nc#1"}));
  t.nc->setInput(1, t.a);
  EXPECT_EQ(users(*t.b), (std::vector<std::string>{"nc#0"}));
  EXPECT_EQ(users(*t.a), (std::vector<std::string>{"nb#0", "nc#1"}));
  t.g.replaceAllUsesWith(t.a, t.x);
  EXPECT_FALSE(t.a->hasUses());
  EXPECT_EQ(users(*t.x), (std::vector<std::string>{"na#0", "nb#0", "nb#1", "nc#1"}));
  EXPECT_TRUE(t.nb->replaceUsesOfWith(t.x, t.a));
  EXPECT_EQ(users(*t.a), (std::vector<std::string>{"nb#0", "nb#1"}));
  t.nb->setInputs({t.a});
  EXPECT_EQ(t.nb->inputs.size(), 1u);
  EXPECT_EQ(users(*t.a), (std::vector<std::string>{"nb#0"}));
  t.nb->setInput(0, nullptr);
  EXPECT_FALSE(t.a->hasUses());
  EXPECT_FALSE(refused(t.g)) << "use lists stay consistent";
}

TEST(Graph, CloneIsDeepAndIdentical) {
  auto g = parseGraph(R"(graph "g" {
  input %x : f32[2,3]
  param %w : f32[3,4] init "w" external "/w.bin" offset 0 length 48
  %y : f32[2,4] = MatMul(%x, %w) name "mm"
  %z : f32[2,4] in cpu = zinc.Copy(%y) name "out" on d2h
  output %z
})", "t.zir");
  ASSERT_TRUE(bool(g)) << llvm::toString(g.takeError());
  std::unique_ptr<Graph> copy = (*g)->clone();
  EXPECT_EQ(print(**g), print(*copy));
  EXPECT_FALSE(refused(*copy));
  // Independent: editing the copy leaves the original alone.
  Value *w = copy->lookupValue("w");
  EXPECT_NE(w, (*g)->lookupValue("w"));
  copy->eraseNode(copy->firstNode());
  EXPECT_EQ((*g)->numNodes(), 2u);
  EXPECT_EQ(copy->numNodes(), 1u);
  EXPECT_TRUE((*g)->lookupValue("w")->hasUses());
  EXPECT_FALSE(w->hasUses());
}

// Nodes and values live in their graph's arena: a swap must carry it with
// them, and erasing destroys at once (the use lists are left) while the
// bytes wait for the graph.
TEST(Graph, SwapCarriesNodesAndValuesWithTheirArena) {
  auto other = std::make_unique<Graph>();
  {
    Chain t;
    t.g.swap(*other);
    EXPECT_EQ(t.g.numNodes(), 0u);
  } // The chain's first graph, now empty, is gone.
  EXPECT_EQ(order(*other), (std::vector<std::string>{"na", "nb", "nc"}));
  Value *a = other->lookupValue("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(users(*a), (std::vector<std::string>{"nb#0"}));
  other->setOutputs({a});
  other->eraseNode(other->lastNode());
  other->eraseNode(other->lastNode());
  other->eraseDeadValues();
  EXPECT_FALSE(refused(*other));
  EXPECT_EQ(other->lookupValue("b"), nullptr);
  EXPECT_FALSE(a->hasUses());
  std::unique_ptr<Graph> copy = other->clone();
  EXPECT_EQ(print(*copy), print(*other));
  EXPECT_FALSE(refused(*copy));
}

TEST(ValueTable, IsDenseByIdAndHoldsAcrossAClone) {
  Chain t;
  ValueTable<uint64_t> offsets(t.g.valueIdBound());
  offsets[t.b] = 64;
  EXPECT_EQ(offsets.lookup(t.b), 64u);
  EXPECT_EQ(offsets.lookup(t.a), 0u) << "never set reads as zero";
  // A clone keeps the ids: the table reads its values as the original's.
  std::unique_ptr<Graph> copy = t.g.clone();
  EXPECT_EQ(offsets.lookup(copy->lookupValue("b")), 64u);
  // A value made later grows the table when set.
  Value *d = t.g.addValue("d", DType::F32, {2}, ValueRole::Activation);
  EXPECT_EQ(offsets.lookup(d), 0u);
  offsets[d] = 128;
  EXPECT_EQ(offsets.at(d), 128u);
  EXPECT_EQ(offsets.idBound(), t.g.valueIdBound());
}

TEST(Graph, IsOutputFollowsSetOutputs) {
  Chain t;
  EXPECT_TRUE(t.g.isOutput(t.c));
  EXPECT_FALSE(t.g.isOutput(t.b));
  t.g.setOutputs({t.b});
  EXPECT_TRUE(t.g.isOutput(t.b));
  EXPECT_FALSE(t.g.isOutput(t.c));
}

TEST(Graph, EffectsComeFromTheDeclaration) {
  Chain t;
  Value *m = t.g.addValue("m", DType::F32, {2}, ValueRole::State);
  Node *store = t.g.addNode("CopyInto", "store", {t.c, m}, {}, {}, kZincDomain);
  EXPECT_FALSE(store->writesInput(0));
  EXPECT_TRUE(store->writesInput(1));
  EXPECT_FALSE(t.nb->writesInput(0)) << "ONNX ops are pure";
  EXPECT_FALSE(t.nb->effects().updatesInPlace());
}

} // namespace
