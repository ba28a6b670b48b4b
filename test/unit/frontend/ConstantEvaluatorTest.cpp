//===- ConstantEvaluatorTest.cpp - Folding arithmetic, op by op -----------===//
#include "compiler/frontend/ConstantEvaluator.h"
#include "onnx/defs/parser.h"
#include "gtest/gtest.h"
#include <cmath>

using namespace zinc::frontend;
using TP = onnx::TensorProto;

namespace {

ConstantTensor ints(std::vector<int64_t> values, std::vector<int64_t> dims) {
  ConstantTensor t = ConstantTensor::make(TP::INT64, dims);
  t.ints = std::move(values);
  return t;
}

ConstantTensor scalar(int64_t v) { return ints({v}, {}); }

ConstantTensor floats(std::vector<double> values, std::vector<int64_t> dims) {
  ConstantTensor t = ConstantTensor::make(TP::FLOAT, dims);
  t.reals = std::move(values);
  return t;
}

/// Evaluates the node written in onnx's text syntax ("y = Op <attrs> (...)").
llvm::Optional<ConstantTensor>
eval(const char *text, std::vector<const ConstantTensor *> inputs,
     int64_t opset = 17, int64_t maxElements = 1 << 20) {
  onnx::NodeProto node;
  onnx::OnnxParser parser(text);
  auto status = parser.Parse(node);
  EXPECT_TRUE(status.IsOK()) << status.ErrorMessage();
  return evaluateNode(node, inputs, opset, maxElements);
}

TEST(ConstantEvaluatorTest, SliceClampsAndStepsBackwards) {
  ConstantTensor x = ints({0, 1, 2, 3, 4, 5}, {6});
  // PyTorch spells "to the end" as INT64_MAX.
  ConstantTensor s = ints({-2}, {1}), e = ints({INT64_MAX}, {1});
  auto tail = eval("y = Slice(x, s, e)", {&x, &s, &e});
  ASSERT_TRUE(tail);
  EXPECT_EQ(tail->ints, (std::vector<int64_t>{4, 5}));

  ConstantTensor s2 = ints({-1}, {1}), e2 = ints({INT64_MIN}, {1}),
                 a = ints({0}, {1}), st = ints({-2}, {1});
  auto back = eval("y = Slice(x, s, e, a, st)", {&x, &s2, &e2, &a, &st});
  ASSERT_TRUE(back);
  EXPECT_EQ(back->ints, (std::vector<int64_t>{5, 3, 1}));
  EXPECT_EQ(back->dims, (llvm::SmallVector<int64_t, 4>{3}));
}

TEST(ConstantEvaluatorTest, SliceOfAMatrixAlongTwoAxes) {
  ConstantTensor m = ints({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3});
  ConstantTensor s = ints({0, 1}, {2}), e = ints({2, 3}, {2}),
                 a = ints({0, 1}, {2});
  auto y = eval("y = Slice(m, s, e, a)", {&m, &s, &e, &a});
  ASSERT_TRUE(y);
  EXPECT_EQ(y->ints, (std::vector<int64_t>{2, 3, 5, 6}));
}

TEST(ConstantEvaluatorTest, IntegerDivTruncatesAndModFollowsTheDivisor) {
  ConstantTensor a = ints({7, -7}, {2}), b = scalar(2);
  auto div = eval("y = Div(a, b)", {&a, &b});
  ASSERT_TRUE(div);
  EXPECT_EQ(div->ints, (std::vector<int64_t>{3, -3}));
  auto mod = eval("y = Mod(a, b)", {&a, &b});
  ASSERT_TRUE(mod);
  EXPECT_EQ(mod->ints, (std::vector<int64_t>{1, 1}));
  auto fmod = eval("y = Mod <fmod = 1> (a, b)", {&a, &b});
  ASSERT_TRUE(fmod);
  EXPECT_EQ(fmod->ints, (std::vector<int64_t>{1, -1}));
  ConstantTensor zero = scalar(0);
  EXPECT_FALSE(eval("y = Div(a, b)", {&a, &zero}));
}

TEST(ConstantEvaluatorTest, FloatResultsRoundToF32) {
  ConstantTensor d = floats({16.0, 2.0}, {2});
  auto r = eval("y = Sqrt(x)", {&d});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->reals[0], 4.0);
  // sqrt(2) as one f32 operation gives, not the double.
  EXPECT_EQ(r->reals[1], static_cast<double>(std::sqrt(2.0f)));
}

TEST(ConstantEvaluatorTest, RangeOverIntegersAndFloats) {
  ConstantTensor s = scalar(2), l = scalar(-3), d = scalar(-2);
  auto down = eval("y = Range(s, l, d)", {&s, &l, &d});
  ASSERT_TRUE(down);
  EXPECT_EQ(down->ints, (std::vector<int64_t>{2, 0, -2}));
  ConstantTensor fs = floats({0}, {}), fl = floats({1}, {}),
                 fd = floats({0.25}, {});
  auto up = eval("y = Range(s, l, d)", {&fs, &fl, &fd});
  ASSERT_TRUE(up);
  EXPECT_EQ(up->reals, (std::vector<double>{0, 0.25, 0.5, 0.75}));
}

TEST(ConstantEvaluatorTest, UnsqueezeAxesFromInputOrAttribute) {
  ConstantTensor x = ints({5, 6}, {2}), axes = ints({0, -1}, {2});
  auto at13 = eval("y = Unsqueeze(x, axes)", {&x, &axes});
  ASSERT_TRUE(at13);
  EXPECT_EQ(at13->dims, (llvm::SmallVector<int64_t, 4>{1, 2, 1}));
  auto at11 = eval("y = Unsqueeze <axes = [0]> (x)", {&x}, /*opset=*/11);
  ASSERT_TRUE(at11);
  EXPECT_EQ(at11->dims, (llvm::SmallVector<int64_t, 4>{1, 2}));
  ConstantTensor one = ints({7}, {1, 1});
  auto sq = eval("y = Squeeze(x)", {&one});
  ASSERT_TRUE(sq);
  EXPECT_TRUE(sq->dims.empty());
}

TEST(ConstantEvaluatorTest, GatherConcatReshapeBuildAViewTarget) {
  ConstantTensor shape = ints({4, 16, 64}, {3}), idx = ints({-2}, {});
  auto t = eval("y = Gather <axis = 0> (s, i)", {&shape, &idx});
  ASSERT_TRUE(t);
  EXPECT_EQ(t->ints, (std::vector<int64_t>{16}));
  EXPECT_TRUE(t->dims.empty());
  ConstantTensor a = ints({4}, {1}), b = ints({16}, {1}), c = ints({4, 16}, {2});
  auto cat = eval("y = Concat <axis = 0> (a, b, c)", {&a, &b, &c});
  ASSERT_TRUE(cat);
  EXPECT_EQ(cat->ints, (std::vector<int64_t>{4, 16, 4, 16}));
  ConstantTensor target = ints({2, -1}, {2});
  auto r = eval("y = Reshape(x, t)", {&*cat, &target});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->dims, (llvm::SmallVector<int64_t, 4>{2, 2}));
  ConstantTensor bad = ints({3, -1}, {2});
  EXPECT_FALSE(eval("y = Reshape(x, t)", {&*cat, &bad}));
}

TEST(ConstantEvaluatorTest, WhereExpandAndCastBroadcast) {
  ConstantTensor cond = ConstantTensor::make(TP::BOOL, {2});
  cond.ints = {1, 0};
  ConstantTensor x = floats({1.5}, {}), y = floats({-2.5, -3.5}, {2, 1});
  auto w = eval("z = Where(c, x, y)", {&cond, &x, &y});
  ASSERT_TRUE(w);
  EXPECT_EQ(w->dims, (llvm::SmallVector<int64_t, 4>{2, 2}));
  EXPECT_EQ(w->reals, (std::vector<double>{1.5, -2.5, 1.5, -3.5}));
  ConstantTensor shape = ints({3, 2}, {2});
  auto e = eval("z = Expand(x, s)", {&cond, &shape});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->ints, (std::vector<int64_t>{1, 0, 1, 0, 1, 0}));
  ConstantTensor f = floats({-2.7, 2.7}, {2});
  auto c = eval("z = Cast <to = 7> (x)", {&f});
  ASSERT_TRUE(c);
  EXPECT_EQ(c->ints, (std::vector<int64_t>{-2, 2}));
}

TEST(ConstantEvaluatorTest, RefusesOutputsPastTheLimit) {
  ConstantTensor shape = ints({1024, 1024}, {2});
  EXPECT_FALSE(eval("y = ConstantOfShape(s)", {&shape}, 17, /*max=*/1000));
  auto ok = eval("y = ConstantOfShape(s)", {&shape}, 17, 1 << 20);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->elemType, TP::FLOAT);
  EXPECT_FALSE(canEvaluate("MatMul"));
  EXPECT_TRUE(canEvaluate("Range"));
}

} // namespace
