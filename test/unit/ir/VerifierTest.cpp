//===- VerifierTest.cpp - One broken graph per invariant of the verifier --===//
#include "zinc/ir/Verifier.h"
#include "zinc/ir/Parser.h"
#include "gtest/gtest.h"

using namespace zinc;
using namespace zinc::ir;

namespace {

std::unique_ptr<Graph> parse(llvm::StringRef text) {
  auto g = parseGraph(text, "t.zir");
  if (!g) {
    ADD_FAILURE() << llvm::toString(g.takeError());
    return nullptr;
  }
  return std::move(*g);
}

/// The verifier's message for `g`, or "ok".
std::string verify(const Graph &g) {
  if (llvm::Error err = verifyGraph(g))
    return llvm::toString(std::move(err));
  return "ok";
}

Node *node(Graph &g, size_t i) { return *std::next(g.nodes().begin(), i); }

const char *kValid = R"(graph "g" {
  input %x : f32[2,3]
  param %w : f32[3,4] init "w"
  const %shape : i64[2] init "shape"
  %y : f32[2,4] = MatMul(%x, %w) name "MatMul_0"
  %r : f32[4,2] = Reshape(%y, %shape) name "Reshape_0"
  %d : f32[4,2], none = Dropout(%r, none) name "Dropout_0"
  output %d
})";

TEST(Verifier, AcceptsAValidGraph) {
  auto g = parse(kValid);
  ASSERT_TRUE(g);
  EXPECT_EQ(verify(*g), "ok");
}

TEST(Verifier, AcceptsUnnamedNodes) {
  auto g = parse(R"(graph "g" {
  input %x : f32[1]
  %a : f32[1] = Neg(%x)
  %b : f32[1] = Neg(%a)
  output %b
})");
  ASSERT_TRUE(g);
  EXPECT_EQ(verify(*g), "ok");
}

TEST(Verifier, UseBeforeDefinition) {
  auto g = parse(R"(graph "g" {
  input %x : f32[2,3]
  %y : f32[2,4] = MatMul(%x, %w) name "MatMul_0"
  %w : f32[3,4] = Identity(%x) name "Identity_0"
  output %y
})");
  ASSERT_TRUE(g);
  EXPECT_EQ(verify(*g), "verifier: node 'MatMul_0' (MatMul): input 1 '%w' "
                        "is used before it is defined");
}

TEST(Verifier, NodeUsesItsOwnOutput) {
  auto g = parse(R"(graph "g" {
  input %x : f32[1]
  %y : f32[1] = Add(%x, %y) name "loop"
  output %y
})");
  ASSERT_TRUE(g);
  EXPECT_EQ(verify(*g), "verifier: node 'loop' (Add): input 1 '%y' is used "
                        "before it is defined");
}

TEST(Verifier, UseOfUndefinedValue) {
  auto g = parse(R"(graph "g" {
  input %x : f32[1]
  value %gone : f32[1]
  %y : f32[1] = Add(%x, %gone) name "a"
  output %y
})");
  ASSERT_TRUE(g);
  EXPECT_EQ(verify(*g),
            "verifier: node 'a' (Add): input 1 '%gone' is never defined");
}

TEST(Verifier, ValueDefinedByTwoNodes) {
  auto g = parse(R"(graph "g" {
  input %x : f32[1]
  %y : f32[1] = Neg(%x) name "first"
  %z : f32[1] = Abs(%x) name "second"
  output %y
})");
  ASSERT_TRUE(g);
  // The parser refuses a second definition, so build it by editing.
  node(*g, 1)->outputs[0] = g->lookupValue("y");
  EXPECT_EQ(verify(*g), "verifier: node 'first' (Neg): output 0 '%y' is "
                        "defined again by node 'second' (Abs)");
}

TEST(Verifier, NodeRedefinesGraphInput) {
  auto g = parse(R"(graph "g" {
  input %x : f32[1]
  %y : f32[1] = Neg(%x) name "n"
  output %y
})");
  ASSERT_TRUE(g);
  Value *y = g->lookupValue("y");
  y->role = ValueRole::Input;
  g->addInput(y);
  y->role = ValueRole::Activation;
  EXPECT_EQ(verify(*g), "verifier: graph input '%y' has role act, expected "
                        "input");
  y->role = ValueRole::Input;
  EXPECT_EQ(verify(*g), "verifier: node 'n' (Neg): output 0 '%y' has role "
                        "input, expected act");
}

TEST(Verifier, NodeRedefinesInitializer) {
  auto g = parse(R"(graph "g" {
  input %x : f32[1]
  param %w : f32[1] init "w"
  %y : f32[1] = Neg(%x) name "n"
  output %y
})");
  ASSERT_TRUE(g);
  Value *w = g->lookupValue("w");
  node(*g, 0)->outputs[0] = w;
  w->def = node(*g, 0);
  EXPECT_EQ(verify(*g), "verifier: node 'n' (Neg): output 0 '%w' has role "
                        "param, expected act");
}

TEST(Verifier, OutputWithInitializer) {
  auto g = parse(kValid);
  ASSERT_TRUE(g);
  g->lookupValue("y")->init = InitializerRef{"y", "", 0, 0};
  EXPECT_EQ(verify(*g), "verifier: value '%y' has an initializer but role "
                        "act, expected param or const");
}

TEST(Verifier, OutputDefPointsElsewhere) {
  auto g = parse(kValid);
  ASSERT_TRUE(g);
  g->lookupValue("r")->def = node(*g, 0);
  EXPECT_EQ(verify(*g), "verifier: node 'Reshape_0' (Reshape): output 0 "
                        "'%r' does not point back at its node (def is node "
                        "'MatMul_0' (MatMul))");
  g->lookupValue("r")->def = nullptr;
  EXPECT_EQ(verify(*g), "verifier: node 'Reshape_0' (Reshape): output 0 "
                        "'%r' does not point back at its node (def is null)");
}

TEST(Verifier, DefOfValueThatNoNodeOutputs) {
  auto g = parse(R"(graph "g" {
  input %x : f32[1]
  value %v : f32[1]
  %y : f32[1] = Neg(%x) name "n"
  output %y
})");
  ASSERT_TRUE(g);
  g->lookupValue("v")->def = node(*g, 0);
  EXPECT_EQ(verify(*g), "verifier: value '%v' has a def node that does not "
                        "output it");
}

TEST(Verifier, GraphOutputNotDefined) {
  auto g = parse(R"(graph "g" {
  input %x : f32[1]
  value %v : f32[1]
  output %v
})");
  ASSERT_TRUE(g);
  EXPECT_EQ(verify(*g), "verifier: graph output 0 '%v' is never defined");
}

TEST(Verifier, GraphOutputOfErasedNode) {
  auto g = parse(kValid);
  ASSERT_TRUE(g);
  g->eraseNode(node(*g, 2));
  EXPECT_EQ(verify(*g), "verifier: graph output 0 '%d' is never defined");
}

TEST(Verifier, InitializerWithoutReference) {
  auto g = parse(R"(graph "g" {
  param %w : f32[3]
})");
  ASSERT_TRUE(g);
  EXPECT_EQ(verify(*g),
            "verifier: value '%w' has role param but no initializer");
}

TEST(Verifier, ConstantWithoutReference) {
  auto g = parse(R"(graph "g" {
  const %c : i64[2]
})");
  ASSERT_TRUE(g);
  EXPECT_EQ(verify(*g),
            "verifier: value '%c' has role const but no initializer");
}

TEST(Verifier, InitializerWithWrongRole) {
  auto g = parse(R"(graph "g" {
  input %x : f32[2] init "x"
  output %x
})");
  ASSERT_TRUE(g);
  EXPECT_EQ(verify(*g), "verifier: value '%x' has an initializer but role "
                        "input, expected param or const");
}

TEST(Verifier, GraphInputWithWrongRole) {
  auto g = parse(kValid);
  ASSERT_TRUE(g);
  g->addInput(g->lookupValue("w"));
  EXPECT_EQ(verify(*g),
            "verifier: graph input '%w' has role param, expected input");
}

TEST(Verifier, InputRoleWithoutGraphInput) {
  auto g = parse(kValid);
  ASSERT_TRUE(g);
  Value *w = g->lookupValue("w");
  w->role = ValueRole::Input;
  w->init.reset();
  EXPECT_EQ(verify(*g),
            "verifier: value '%w' has role input but is not a graph input");
}

TEST(Verifier, GraphInputListedTwice) {
  auto g = parse(kValid);
  ASSERT_TRUE(g);
  g->addInput(g->lookupValue("x"));
  EXPECT_EQ(verify(*g), "verifier: graph input '%x' is listed twice");
}

TEST(Verifier, DuplicateValueNames) {
  auto g = parse(kValid);
  ASSERT_TRUE(g);
  // The Graph's name index refuses duplicates; a pass that renames a value
  // behind its back is what this catches.
  g->lookupValue("r")->name = "y";
  EXPECT_EQ(verify(*g), "verifier: two values are named '%y'");
}

TEST(Verifier, DuplicateNodeNames) {
  auto g = parse(R"(graph "g" {
  input %x : f32[1]
  %a : f32[1] = Neg(%x) name "n"
  %b : f32[1] = Abs(%a) name "n"
  output %b
})");
  ASSERT_TRUE(g);
  EXPECT_EQ(verify(*g), "verifier: node 'n' (Abs): name already used by an "
                        "earlier node 'n' (Neg)");
}

TEST(Verifier, DynamicShape) {
  auto g = parse(R"(graph "g" {
  input %x : f32[-1,3]
  output %x
})");
  ASSERT_TRUE(g);
  EXPECT_EQ(verify(*g), "verifier: value '%x' has a dynamic shape [-1,3]; "
                        "every shape must be static");
}

TEST(Verifier, QuotedNamesInMessages) {
  auto g = parse(R"(graph "g" {
  input %x : f32[1]
  %"onnx::Add_1" : f32[1] = Add(%x, %"/l.0/out") name "/l.0/Add"
  %"/l.0/out" : f32[1] = Neg(%x) name "/l.0/Neg"
  output %"onnx::Add_1"
})");
  ASSERT_TRUE(g);
  EXPECT_EQ(verify(*g), "verifier: node '/l.0/Add' (Add): input 1 "
                        "'%\"/l.0/out\"' is used before it is defined");
}

TEST(Verifier, ForeignValue) {
  auto g = parse(kValid);
  auto other = parse(kValid);
  ASSERT_TRUE(g && other);
  Value *own = node(*g, 0)->inputs[0];
  node(*g, 0)->setInput(0, other->lookupValue("x"));
  EXPECT_EQ(verify(*g), "verifier: node 'MatMul_0' (MatMul): input 0 is not "
                        "a value of this graph");
  // Back, so neither graph outlives a use in the other.
  node(*g, 0)->setInput(0, own);
}

} // namespace
