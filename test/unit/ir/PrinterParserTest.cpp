//===- PrinterParserTest.cpp - Round trips and errors of the IR text form -===//
#include "zinc/ir/Parser.h"
#include "zinc/ir/Printer.h"
#include "gtest/gtest.h"
#include <cmath>
#include <cstring>
#include <random>

using namespace zinc;
using namespace zinc::ir;

namespace {

std::string print(const Graph &g) {
  std::string s;
  llvm::raw_string_ostream os(s);
  printGraph(g, os);
  return os.str();
}

std::unique_ptr<Graph> parseOk(llvm::StringRef text) {
  auto g = parseGraph(text, "t.zir");
  if (!g) {
    ADD_FAILURE() << llvm::toString(g.takeError());
    return nullptr;
  }
  return std::move(*g);
}

std::string parseError(llvm::StringRef text) {
  auto g = parseGraph(text, "t.zir");
  if (g) {
    ADD_FAILURE() << "parsed:\n" << print(**g);
    return "";
  }
  return llvm::toString(g.takeError());
}

/// `text` is in canonical form: printing what it parses to gives it back,
/// and so does a second round.
void expectRoundTrip(llvm::StringRef text) {
  auto g = parseOk(text);
  ASSERT_TRUE(g);
  std::string once = print(*g);
  EXPECT_EQ(once, text);
  auto g2 = parseOk(once);
  ASSERT_TRUE(g2);
  EXPECT_EQ(print(*g2), once);
}

const Attribute &attr(const Graph &g, llvm::StringRef name) {
  const Attribute *a = g.firstNode()->attrs.find(name);
  EXPECT_TRUE(a) << name.str();
  static Attribute none;
  return a ? *a : none;
}

uint64_t bitsOf(double d) {
  uint64_t b;
  std::memcpy(&b, &d, 8);
  return b;
}

TEST(PrinterParser, DeclarationsAndNodes) {
  expectRoundTrip(R"(graph "tiny" opset 17 model "/abs/model.onnx" {
  input %x : f32[2,3]
  param %w : f32[3,4] init "w"
  param %emb : f32[100,8] init "emb" external "/abs/w.bin" offset 0 length 3200
  const %shape : i64[2] init "shape"
  const %s : i64[] init "s" offset 7
  %y : f32[2,4] = MatMul(%x, %w) name "MatMul_0"
  %a : f32[2,2], %b : f32[2,2] = Split(%y) name "s" {axis = 1 : int, split = [2, 2] : ints}
  output %y, %a
}
)");
}

TEST(PrinterParser, GraphFields) {
  auto g = parseOk(R"(graph "g" opset 13 model "/m.onnx" {
  input %x : bf16[]
  param %w : f16[1] init "w" external "/w.bin" offset 16 length 2
})");
  ASSERT_TRUE(g);
  EXPECT_EQ(g->name, "g");
  EXPECT_EQ(g->opsetVersion, 13);
  EXPECT_EQ(g->modelPath, "/m.onnx");
  ASSERT_EQ(g->inputs().size(), 1u);
  EXPECT_EQ(g->inputs()[0]->role, ValueRole::Input);
  EXPECT_EQ(g->inputs()[0]->dtype, DType::BF16);
  EXPECT_TRUE(g->inputs()[0]->shape.empty());
  Value *w = g->lookupValue("w");
  ASSERT_TRUE(w && w->init);
  EXPECT_EQ(w->role, ValueRole::Parameter);
  EXPECT_EQ(*w->init, (InitializerRef{"w", "/w.bin", 16, 2}));
}

TEST(PrinterParser, OpsetAndModelAreOptional) {
  auto g = parseOk("graph \"g\" {\n}\n");
  ASSERT_TRUE(g);
  EXPECT_EQ(print(*g), "graph \"g\" opset 17 {\n}\n");
}

TEST(PrinterParser, QuotedNamesAndEscapes) {
  expectRoundTrip(R"(graph "a \"quoted\" graph\0A" opset 17 {
  input %"onnx::MatMul_12" : f32[2]
  input %"/layer.0/Add_output_0" : f32[2]
  input %"" : f32[2]
  input %"tab\09and\\back" : f32[2]
  input %12 : f32[2]
  %"résultat" : f32[2] = Add(%"onnx::MatMul_12", %12) name "n\"1"
  output %"résultat"
}
)");
}

TEST(PrinterParser, NamesDecodeExactly) {
  auto g = parseOk("graph \"g\" {\n  input %\"a\\\"b\\\\c\\0A\\7F\" : f32[1]\n"
                   "  input %\"caf\xC3\xA9\" : f32[1]\n}\n");
  ASSERT_TRUE(g);
  EXPECT_EQ(g->inputs()[0]->name, "a\"b\\c\n\x7f");
  EXPECT_EQ(g->inputs()[1]->name, "caf\xC3\xA9");
  // Printable bytes above 0x7F stay raw; control bytes are escaped.
  EXPECT_NE(print(*g).find("%\"a\\\"b\\\\c\\0A\\7F\""), std::string::npos);
  EXPECT_NE(print(*g).find("%\"caf\xC3\xA9\""), std::string::npos);
}

TEST(PrinterParser, AbsentOperandsAndResults) {
  expectRoundTrip(R"(graph "g" opset 17 {
  input %x : f32[4]
  %y : f32[4], none = Dropout(%x, none, none) name "d"
  none = Identity(%y)
  output %y
}
)");
}

TEST(PrinterParser, DomainsAndQuotedOps) {
  auto text = R"(graph "g" opset 17 {
  input %x : f32[4]
  %y : f32[4] = zinc.Evict(%x, none) name "e0"
  %z : f32[4] = com.microsoft.FusedGelu(%y)
  zinc.Free(%z) name "f"
  "output"(%x)
  "My-Op"(%x) domain "my domain"
  "dotted.op"(%x)
  "Foo"(%x) domain "not..dotted"
  output %y
}
)";
  expectRoundTrip(text);
  auto g = parseOk(text);
  ASSERT_TRUE(g);
  std::vector<Node *> nodes(g->nodes().begin(), g->nodes().end());
  EXPECT_EQ(nodes[0]->domain, "zinc");
  EXPECT_EQ(nodes[0]->opType, "Evict");
  EXPECT_EQ(nodes[1]->domain, "com.microsoft");
  EXPECT_EQ(nodes[1]->opType, "FusedGelu");
  EXPECT_TRUE(nodes[2]->outputs.empty());
  EXPECT_EQ(nodes[3]->opType, "output");
  EXPECT_EQ(nodes[4]->domain, "my domain");
  EXPECT_EQ(nodes[4]->opType, "My-Op");
  EXPECT_EQ(nodes[5]->domain, "");
  EXPECT_EQ(nodes[5]->opType, "dotted.op");
  EXPECT_EQ(nodes[6]->domain, "not..dotted");
}

TEST(PrinterParser, ForwardReferencesParse) {
  // Order is the verifier's business; the parser resolves names globally.
  auto g = parseOk(R"(graph "g" {
  %b : f32[1] = Neg(%a)
  %a : f32[1] = Neg(%b)
  output %b
})");
  ASSERT_TRUE(g);
  EXPECT_EQ(g->firstNode()->inputs[0], g->lookupValue("a"));
  EXPECT_EQ(g->outputs()[0], g->lookupValue("b"));
}

TEST(PrinterParser, UndefinedValuesAndOddRolesPrint) {
  expectRoundTrip(R"(graph "g" opset 17 {
  input %x : f32[2] init "x"
  param %w : f32[2]
  value %orphan : f32[-1,2]
  %y : f32[2] = Add(%orphan, %w)
  output %y
}
)");
}

TEST(PrinterParser, ScalarAttributes) {
  auto text = R"(graph "g" opset 17 {
  input %x : f32[1]
  Op(%x) {"a b" = "\00" : string, alpha = 0.1 : float, beta = -0 : float, big = -9223372036854775808 : int, inf = inf : float, name = "x\"y" : string, ninf = -inf : float, tiny = 5e-324 : float}
}
)";
  expectRoundTrip(text);
  auto g = parseOk(text);
  ASSERT_TRUE(g);
  EXPECT_EQ(attr(*g, "alpha").f, 0.1);
  EXPECT_EQ(bitsOf(attr(*g, "beta").f), bitsOf(-0.0));
  EXPECT_EQ(attr(*g, "big").i, INT64_MIN);
  EXPECT_TRUE(std::isinf(attr(*g, "inf").f));
  EXPECT_LT(attr(*g, "ninf").f, 0);
  EXPECT_EQ(attr(*g, "tiny").f, 5e-324);
  EXPECT_EQ(attr(*g, "a b").s, std::string(1, '\0'));
  EXPECT_EQ(attr(*g, "name").s, "x\"y");
}

TEST(PrinterParser, ListAttributes) {
  auto text = R"(graph "g" opset 17 {
  input %x : f32[1]
  Op(%x) {e = [] : ints, f = [1, 0.5, -2.5e-10, 0x7FF0000000000001] : floats, i = [-1, 0, 3] : ints, s = ["", "a", "\0A"] : strings, z = [] : strings}
}
)";
  expectRoundTrip(text);
  auto g = parseOk(text);
  ASSERT_TRUE(g);
  EXPECT_EQ(attr(*g, "e").kind, AttrKind::Ints);
  EXPECT_TRUE(attr(*g, "e").ints.empty());
  EXPECT_EQ(attr(*g, "i").ints, (std::vector<int64_t>{-1, 0, 3}));
  ASSERT_EQ(attr(*g, "f").floats.size(), 4u);
  EXPECT_EQ(bitsOf(attr(*g, "f").floats[3]), 0x7FF0000000000001u);
  EXPECT_EQ(attr(*g, "s").strings, (std::vector<std::string>{"", "a", "\n"}));
  EXPECT_EQ(attr(*g, "z").kind, AttrKind::Strings);
}

TEST(PrinterParser, AttributesPrintSortedByName) {
  auto g = parseOk(R"(graph "g" {
  input %x : f32[1]
  Op(%x) {b = 1 : int, a = 2 : int}
})");
  ASSERT_TRUE(g);
  EXPECT_NE(print(*g).find("{a = 2 : int, b = 1 : int}"), std::string::npos);
}

TEST(PrinterParser, TensorAttributesOfEveryType) {
  expectRoundTrip(R"(graph "g" opset 17 {
  input %x : f32[1]
  Op(%x) {b = [0, 1, 2] : tensor<bool[3]>, bf = [1.5, -inf, 3.3895314e+38] : tensor<bf16[3]>, d = [0.1, -0, 1e+308] : tensor<f64[3]>, e = [] : tensor<f32[0,4]>, f = [0.1, 1e-45, 3.4028235e+38] : tensor<f32[3]>, h = [6.1035156e-05, 65504, -0] : tensor<f16[3]>, i16 = [-32768, 32767] : tensor<i16[2]>, i32 = [-2147483648] : tensor<i32[1]>, i64 = [-9223372036854775808, 9223372036854775807] : tensor<i64[2]>, i8 = [-128, 127] : tensor<i8[2]>, s = [7] : tensor<i64[]>, u16 = [65535] : tensor<u16[1]>, u32 = [4294967295] : tensor<u32[1]>, u64 = [18446744073709551615] : tensor<u64[1]>, u8 = [255, 0] : tensor<u8[2]>}
}
)");
}

TEST(PrinterParser, TensorBytesAreExact) {
  auto g = parseOk(R"(graph "g" {
  input %x : f32[1]
  Op(%x) {f = [1, -2] : tensor<f32[2]>, h = [1] : tensor<f16[1]>, i = [258] : tensor<i16[1]>}
})");
  ASSERT_TRUE(g);
  EXPECT_EQ(attr(*g, "f").tensor.bytes,
            (std::vector<uint8_t>{0, 0, 0x80, 0x3F, 0, 0, 0, 0xC0}));
  EXPECT_EQ(attr(*g, "h").tensor.bytes, (std::vector<uint8_t>{0, 0x3C}));
  EXPECT_EQ(attr(*g, "i").tensor.bytes, (std::vector<uint8_t>{2, 1}));
  EXPECT_EQ(attr(*g, "i").tensor.shape, (llvm::SmallVector<int64_t, 4>{1}));
}

TEST(PrinterParser, TensorsThatNumbersCannotCarryPrintAsHex) {
  // A NaN payload, a size that disagrees with the shape, a dynamic shape.
  auto text = R"(graph "g" opset 17 {
  input %x : f32[1]
  Op(%x) {h = "0x017E" : tensor<f16[1]>, n = "0x0100C07F0000803F" : tensor<f32[2]>, short = "0x01" : tensor<i32[1]>, sym = "0x" : tensor<i64[-1]>}
}
)";
  expectRoundTrip(text);
  auto g = parseOk(text);
  ASSERT_TRUE(g);
  EXPECT_EQ(attr(*g, "n").tensor.bytes,
            (std::vector<uint8_t>{1, 0, 0xC0, 0x7F, 0, 0, 0x80, 0x3F}));
  EXPECT_TRUE(attr(*g, "sym").tensor.bytes.empty());
}

TEST(PrinterParser, DoublesRoundTripBitExactly) {
  std::mt19937_64 rng(42);
  std::vector<double> samples = {
      0.0,        -0.0, 0.1, 1.0 / 3, 5e-324, 1e308, 2.2250738585072014e-308,
      123456789.0};
  for (int i = 0; i < 2000; ++i) {
    uint64_t bits = rng();
    double d;
    std::memcpy(&d, &bits, 8);
    samples.push_back(d);
  }
  for (double d : samples) {
    std::string text;
    llvm::raw_string_ostream os(text);
    os << "graph \"g\" {\n  input %x : f32[1]\n  Op(%x) {f = [";
    printDouble(d, os);
    os << "] : floats}\n}\n";
    auto g = parseOk(os.str());
    ASSERT_TRUE(g) << os.str();
    EXPECT_EQ(bitsOf(attr(*g, "f").floats[0]), bitsOf(d)) << os.str();
  }
}

TEST(PrinterParser, FloatTensorsRoundTripBitExactly) {
  std::mt19937 rng(7);
  Attribute a;
  a.name = "t";
  a.kind = AttrKind::Tensor;
  a.tensor.dtype = DType::F32;
  a.tensor.shape = {1000};
  for (int i = 0; i < 1000; ++i) {
    uint32_t bits = rng();
    if ((bits & 0x7F800000u) == 0x7F800000u)
      bits &= 0xBFFFFFFFu; // keep NaNs out: they force the hex form
    for (int b = 0; b < 4; ++b)
      a.tensor.bytes.push_back((bits >> (8 * b)) & 0xFF);
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "graph \"g\" {\n  input %x : f32[1]\n  Op(%x) {t = ";
  printAttributeValue(a, os);
  os << "}\n}\n";
  EXPECT_EQ(os.str().find("0x"), std::string::npos) << "expected numbers";
  auto g = parseOk(os.str());
  ASSERT_TRUE(g);
  EXPECT_EQ(attr(*g, "t").tensor, a.tensor);
}

TEST(PrinterParser, CommentsAreIgnored) {
  auto g = parseOk(R"(// RUN: zinc-opt %s
graph "g" { // the graph
  input %x : f32[1] // an input
  output %x
})");
  ASSERT_TRUE(g);
  EXPECT_EQ(g->outputs().size(), 1u);
}

TEST(PrinterParser, PrintsGraphsInStatesThatTextCannotBuild) {
  // After eraseNode a value has no definition; it prints as `value`.
  auto g = parseOk(R"(graph "g" {
  input %x : f32[1]
  %y : f32[1] = Neg(%x) name "n"
  output %y
})");
  ASSERT_TRUE(g);
  g->eraseNode(g->firstNode());
  EXPECT_EQ(print(*g), R"(graph "g" opset 17 {
  input %x : f32[1]
  value %y : f32[1]
  output %y
}
)");
}

//===----------------------------------------------------------------------===//
// Parse errors
//===----------------------------------------------------------------------===//

TEST(ParseErrors, MissingGraphKeyword) {
  EXPECT_EQ(parseError("graf \"g\" {}"),
            "t.zir:1:1: expected 'graph', found 'graf'");
}

TEST(ParseErrors, UnknownElementType) {
  EXPECT_EQ(parseError("graph \"g\" {\n  input %x : f33[2]\n}"),
            "t.zir:2:14: unknown element type 'f33'");
}

TEST(ParseErrors, MissingColon) {
  EXPECT_EQ(parseError("graph \"g\" {\n  input %x f32[2]\n}"),
            "t.zir:2:12: expected ':', found 'f32'");
}

TEST(ParseErrors, Redefinition) {
  EXPECT_EQ(parseError("graph \"g\" {\n  input %x : f32[2]\n"
                       "  %x : f32[2] = Neg(%x)\n}"),
            "t.zir:3:3: redefinition of value '%x'");
}

TEST(ParseErrors, UndefinedValue) {
  EXPECT_EQ(parseError("graph \"g\" {\n  input %x : f32[2]\n"
                       "  %y : f32[2] = Add(%x, %\"nope::1\")\n}"),
            "t.zir:3:25: use of undefined value '%\"nope::1\"'");
}

TEST(ParseErrors, UndefinedOutput) {
  EXPECT_EQ(parseError("graph \"g\" {\n  output %z\n}"),
            "t.zir:2:10: use of undefined value '%z'");
}

TEST(ParseErrors, UnterminatedString) {
  EXPECT_EQ(parseError("graph \"g {\n}"), "t.zir:1:7: unterminated string");
}

TEST(ParseErrors, InvalidEscape) {
  EXPECT_EQ(parseError("graph \"a\\qb\" {\n}"),
            "t.zir:1:9: invalid escape in string");
}

TEST(ParseErrors, UnexpectedCharacter) {
  EXPECT_EQ(parseError("graph \"g\" {\n  input %x : f32[2] #\n}"),
            "t.zir:2:21: unexpected character '#'");
}

TEST(ParseErrors, BadNumber) {
  EXPECT_EQ(parseError("graph \"g\" {\n  input %x : f32[2x]\n}"),
            "t.zir:2:18: invalid number '2x'");
}

TEST(ParseErrors, MissingCloseBrace) {
  EXPECT_EQ(parseError("graph \"g\" {\n  input %x : f32[2]\n"),
            "t.zir:3:1: expected '}' at the end of the graph");
}

TEST(ParseErrors, TrailingInput) {
  EXPECT_EQ(parseError("graph \"g\" {\n}\ngraph"),
            "t.zir:3:1: expected end of input after the graph, found 'graph'");
}

TEST(ParseErrors, UnknownAttributeKind) {
  EXPECT_EQ(parseError("graph \"g\" {\n  input %x : f32[1]\n"
                       "  Op(%x) {a = 1 : integer}\n}"),
            "t.zir:3:19: unknown attribute kind 'integer'; expected int, "
            "float, string, ints, floats, strings or tensor");
}

TEST(ParseErrors, AttributeValueOfWrongKind) {
  EXPECT_EQ(parseError("graph \"g\" {\n  input %x : f32[1]\n"
                       "  Op(%x) {a = \"s\" : int}\n}"),
            "t.zir:3:15: an attribute of kind 'int' needs a number");
  EXPECT_EQ(parseError("graph \"g\" {\n  input %x : f32[1]\n"
                       "  Op(%x) {a = 1.5 : int}\n}"),
            "t.zir:3:15: expected an integer, found '1.5'");
  EXPECT_EQ(parseError("graph \"g\" {\n  input %x : f32[1]\n"
                       "  Op(%x) {a = [1, \"s\"] : ints}\n}"),
            "t.zir:3:19: an attribute of kind 'ints' needs numbers");
}

TEST(ParseErrors, DuplicateAttribute) {
  EXPECT_EQ(parseError("graph \"g\" {\n  input %x : f32[1]\n"
                       "  Op(%x) {a = 1 : int, a = 2 : int}\n}"),
            "t.zir:3:24: duplicate attribute 'a'");
}

TEST(ParseErrors, TensorElementCount) {
  EXPECT_EQ(parseError("graph \"g\" {\n  input %x : f32[1]\n"
                       "  Op(%x) {t = [1, 2, 3] : tensor<i64[2,2]>}\n}"),
            "t.zir:3:15: tensor has 3 elements, its type [2,2] needs 4");
}

TEST(ParseErrors, TensorElementRange) {
  EXPECT_EQ(parseError("graph \"g\" {\n  input %x : f32[1]\n"
                       "  Op(%x) {t = [1, 256] : tensor<u8[2]>}\n}"),
            "t.zir:3:19: element 256 does not fit in u8");
}

TEST(ParseErrors, BadHexTensor) {
  EXPECT_EQ(parseError("graph \"g\" {\n  input %x : f32[1]\n"
                       "  Op(%x) {t = \"0x0G\" : tensor<u8[1]>}\n}"),
            "t.zir:3:15: expected \"0x\" and two hex digits per byte");
}

TEST(ParseErrors, DomainTwice) {
  EXPECT_EQ(parseError("graph \"g\" {\n  input %x : f32[1]\n"
                       "  zinc.Op(%x) domain \"d\"\n}"),
            "t.zir:3:15: the op type already names its domain");
}

TEST(ParseErrors, MissingOperandList) {
  EXPECT_EQ(parseError("graph \"g\" {\n  input %x : f32[1]\n"
                       "  %y : f32[1] = Neg %x\n}"),
            "t.zir:3:21: expected '(', found '%x'");
}

} // namespace
