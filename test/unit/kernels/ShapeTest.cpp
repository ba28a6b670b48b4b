//===- ShapeTest.cpp - Reshape-like, Shape, Constant*, Range --------------===//
#include "test/unit/kernels/KernelCallHelpers.h"
#include <cmath>
#include <gtest/gtest.h>

using namespace zinc;
using namespace zinc::cpu;
using namespace zinc::cpu::test;

namespace {

using V = std::vector<double>;

// Reshape, Squeeze, Unsqueeze, Flatten and Identity copy the bytes as they
// are, whatever the element type.
TEST(ShapeKernels, ReshapeFamilyCopiesBytes) {
  for (KernelFn fn :
       {&runReshape, &runSqueeze, &runUnsqueeze, &runFlatten, &runIdentity}) {
    OwnedTensor in = OwnedTensor::iota<int8_t>(DType::I8, {2, 1, 3});
    OwnedTensor shape = OwnedTensor::i64({2}, {3, 2});
    OwnedTensor out(DType::I8, {3, 2});
    ASSERT_EQ(errorText(runKernel(fn, "Reshape", {}, {&in, &shape}, {&out})),
              "");
    EXPECT_EQ(out.values<int8_t>(), (V{0, 1, 2, 3, 4, 5}));
  }
}

TEST(ShapeKernels, ReshapeRejectsElementCountMismatch) {
  OwnedTensor in = OwnedTensor::f32({2, 3}, V(6, 1.0));
  OwnedTensor shape = OwnedTensor::i64({1}, {5});
  OwnedTensor out(DType::F32, {5});
  EXPECT_NE(
      errorText(runKernel(runReshape, "Reshape", {}, {&in, &shape}, {&out}))
          .find("different element counts"),
      std::string::npos);
}

TEST(ShapeKernels, IdentityRejectsTypeMismatch) {
  OwnedTensor in = OwnedTensor::f32({2}, {1, 2});
  OwnedTensor out(DType::I32, {2});
  EXPECT_NE(errorText(runKernel(runIdentity, "Identity", {}, {&in}, {&out})),
            "");
}

// Shape with start/end (opset 15): negatives count from the back and
// out-of-range bounds clamp.
TEST(ShapeKernels, ShapeSlices) {
  OwnedTensor in(DType::Bool, {3, 4, 5, 6});
  struct Case {
    std::vector<Attribute> attrs;
    V expected;
  } cases[] = {
      {{}, {3, 4, 5, 6}},
      {{intAttr("start", -1)}, {6}},
      {{intAttr("end", -1)}, {3, 4, 5}},
      {{intAttr("start", 1), intAttr("end", 3)}, {4, 5}},
      {{intAttr("start", -10), intAttr("end", 10)}, {3, 4, 5, 6}},
      {{intAttr("start", 3), intAttr("end", 1)}, {}},
  };
  for (const Case &c : cases) {
    AttributeList a;
    for (const Attribute &x : c.attrs)
      a.set(x);
    OwnedTensor out(DType::I64, {static_cast<int64_t>(c.expected.size())});
    ASSERT_EQ(errorText(runKernel(runShape, "Shape", a, {&in}, {&out})), "");
    EXPECT_EQ(out.i64s(), c.expected);
  }
}

TEST(ShapeKernels, ShapeRejectsWrongOutputLength) {
  OwnedTensor in(DType::F32, {3, 4});
  OwnedTensor out(DType::I64, {3});
  EXPECT_NE(errorText(runKernel(runShape, "Shape", {}, {&in}, {&out})), "");
}

TEST(ShapeKernels, ConstantFromTensor) {
  OwnedTensor value =
      OwnedTensor::of<int32_t>(DType::I32, {2, 2}, {1, -2, 3, -4});
  OwnedTensor out(DType::I32, {2, 2});
  ASSERT_EQ(
      errorText(runKernel(runConstant, "Constant",
                          attrs({tensorAttr("value", value)}), {}, {&out})),
      "");
  EXPECT_EQ(out.values<int32_t>(), (V{1, -2, 3, -4}));
}

TEST(ShapeKernels, ConstantFromScalarsAndLists) {
  OwnedTensor f(DType::F32, {});
  ASSERT_EQ(
      errorText(runKernel(runConstant, "Constant",
                          attrs({floatAttr("value_float", 2.5)}), {}, {&f})),
      "");
  EXPECT_EQ(f.f32s(), (V{2.5}));

  OwnedTensor ints(DType::I64, {3});
  ASSERT_EQ(errorText(runKernel(runConstant, "Constant",
                                attrs({intsAttr("value_ints", {7, -8, 9})}), {},
                                {&ints})),
            "");
  EXPECT_EQ(ints.i64s(), (V{7, -8, 9}));

  Attribute floats;
  floats.name = "value_floats";
  floats.kind = AttrKind::Floats;
  floats.floats = {0.5, -1.5};
  OwnedTensor fl(DType::F32, {2});
  ASSERT_EQ(
      errorText(runKernel(runConstant, "Constant", attrs({floats}), {}, {&fl})),
      "");
  EXPECT_EQ(fl.f32s(), (V{0.5, -1.5}));

  OwnedTensor one(DType::I64, {});
  ASSERT_EQ(errorText(runKernel(runConstant, "Constant",
                                attrs({intAttr("value_int", -3)}), {}, {&one})),
            "");
  EXPECT_EQ(one.i64s(), (V{-3}));
}

TEST(ShapeKernels, ConstantErrors) {
  OwnedTensor value = OwnedTensor::f32({2}, {1, 2});
  OwnedTensor wrongType(DType::F64, {2});
  EXPECT_NE(errorText(runKernel(runConstant, "Constant",
                                attrs({tensorAttr("value", value)}), {},
                                {&wrongType})),
            "");
  OwnedTensor wrongShape(DType::F32, {3});
  EXPECT_NE(errorText(runKernel(runConstant, "Constant",
                                attrs({tensorAttr("value", value)}), {},
                                {&wrongShape})),
            "");
  Attribute sparse = stringAttr("sparse_value", "");
  OwnedTensor out(DType::F32, {2});
  EXPECT_EQ(errorText(runKernel(runConstant, "Constant", attrs({sparse}), {},
                                {&out})),
            "unsupported: Constant with sparse_value");
  EXPECT_NE(errorText(runKernel(runConstant, "Constant", {}, {}, {&out})), "");
}

TEST(ShapeKernels, ConstantOfShape) {
  OwnedTensor shape = OwnedTensor::i64({2}, {2, 3});
  OwnedTensor zeros(DType::F32, {2, 3});
  std::fill_n(zeros.ref.as<float>(), 6, 9.0f);
  ASSERT_EQ(errorText(runKernel(runConstantOfShape, "ConstantOfShape", {},
                                {&shape}, {&zeros})),
            "");
  EXPECT_EQ(zeros.f32s(), V(6, 0.0));

  OwnedTensor value = OwnedTensor::of<Half>(DType::F16, {1}, {-1.5});
  OwnedTensor halves(DType::F16, {2, 3});
  ASSERT_EQ(errorText(runKernel(runConstantOfShape, "ConstantOfShape",
                                attrs({tensorAttr("value", value)}), {&shape},
                                {&halves})),
            "");
  EXPECT_EQ(halves.values<Half>(), V(6, -1.5));

  // A shape whose product differs from the output is refused.
  OwnedTensor other = OwnedTensor::i64({2}, {3, 3});
  EXPECT_NE(errorText(runKernel(runConstantOfShape, "ConstantOfShape", {},
                                {&other}, {&zeros})),
            "");
}

TEST(ShapeKernels, RangeIntegerAndFloat) {
  // 10, 7 (limit 6 exclusive, step -3) in int32.
  auto i32 = [](double v) {
    return OwnedTensor::of<int32_t>(DType::I32, {}, {v});
  };
  OwnedTensor s = i32(10), l = i32(6), d = i32(-3);
  OwnedTensor out(DType::I32, {2});
  ASSERT_EQ(errorText(runKernel(runRange, "Range", {}, {&s, &l, &d}, {&out})),
            "");
  EXPECT_EQ(out.values<int32_t>(), (V{10, 7}));

  OwnedTensor fs = OwnedTensor::f32({}, {1}), fl = OwnedTensor::f32({}, {2}),
              fd = OwnedTensor::f32({}, {0.25});
  OwnedTensor fout(DType::F32, {4});
  ASSERT_EQ(
      errorText(runKernel(runRange, "Range", {}, {&fs, &fl, &fd}, {&fout})),
      "");
  EXPECT_EQ(fout.f32s(), (V{1, 1.25, 1.5, 1.75}));

  // An empty range: limit on the wrong side of start.
  OwnedTensor up = i32(1), empty(DType::I32, {0});
  ASSERT_EQ(
      errorText(runKernel(runRange, "Range", {}, {&s, &up, &up}, {&empty})),
      "");
}

TEST(ShapeKernels, RangeErrors) {
  auto i64 = [](double v) { return OwnedTensor::i64({}, {v}); };
  OwnedTensor s = i64(0), l = i64(5), zero = i64(0), one = i64(1);
  OwnedTensor out(DType::I64, {5});
  EXPECT_EQ(
      errorText(runKernel(runRange, "Range", {}, {&s, &l, &zero}, {&out})),
      "Range: delta is zero");
  OwnedTensor shortOut(DType::I64, {4});
  EXPECT_NE(
      errorText(runKernel(runRange, "Range", {}, {&s, &l, &one}, {&shortOut})),
      "");
}

} // namespace
