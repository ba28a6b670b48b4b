//===- ReductionTest.cpp - ReduceSum, ReduceMean and ReduceMax kernels ----===//
#include "test/unit/kernels/KernelCallHelpers.h"
#include <cmath>
#include <gtest/gtest.h>
#include <limits>

using namespace zinc;
using namespace zinc::cpu;
using namespace zinc::cpu::test;

namespace {

using V = std::vector<double>;

V ramp(int64_t n) {
  V v(n);
  for (int64_t i = 0; i < n; ++i)
    v[i] = ((i * 5) % 11) - 4.5;
  return v;
}

enum class Kind { Sum, Mean, Max };

/// Naive reduction of `v` (shape `shape`) over the axes flagged in `red`,
/// in row-major order of the kept axes.
V naiveReduce(const V &v, llvm::ArrayRef<int64_t> shape,
              llvm::ArrayRef<bool> red, Kind kind) {
  llvm::SmallVector<int64_t, 6> outStrides(shape.size(), 0);
  int64_t outCount = 1, n = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    if (red[d]) {
      n *= shape[d];
      continue;
    }
    outStrides[d] = outCount;
    outCount *= shape[d];
  }
  V acc(outCount, kind == Kind::Max ? -INFINITY : 0);
  for (int64_t i = 0; i < static_cast<int64_t>(v.size()); ++i) {
    int64_t rem = i, o = 0;
    for (size_t d = shape.size(); d-- > 0;) {
      o += (rem % shape[d]) * outStrides[d];
      rem /= shape[d];
    }
    acc[o] = kind == Kind::Max ? std::max(acc[o], v[i]) : acc[o] + v[i];
  }
  if (kind == Kind::Mean)
    for (double &a : acc)
      a /= n;
  return acc;
}

struct Reduce {
  KernelFn fn;
  const char *op;
  Kind kind;
};
const Reduce kReduces[] = {{runReduceSum, "ReduceSum", Kind::Sum},
                           {runReduceMean, "ReduceMean", Kind::Mean},
                           {runReduceMax, "ReduceMax", Kind::Max}};

// Every subset of axes of a rank-3 tensor (contiguous groups take the fast
// path, {0, 2} the strided one), with and without keepdims, axes given as
// an attribute (opset 11) and, for ReduceSum, as an input (opset 13).
TEST(ReductionKernels, EveryAxisSubsetMatchesNaive) {
  std::vector<int64_t> shape = {3, 4, 5};
  V xv = ramp(60);
  OwnedTensor x = OwnedTensor::f32(shape, xv);
  for (const Reduce &r : kReduces)
    for (int mask = 1; mask < 8; ++mask)
      for (int keep = 0; keep < 2; ++keep) {
        std::vector<int64_t> axes, outShape;
        llvm::SmallVector<bool, 3> red;
        for (int d = 0; d < 3; ++d) {
          bool isRed = mask & (1 << d);
          red.push_back(isRed);
          if (isRed)
            axes.push_back(d - 3 * (d % 2)); // mix negative axes in
          if (!isRed)
            outShape.push_back(shape[d]);
          else if (keep)
            outShape.push_back(1);
        }
        V expect = naiveReduce(xv, shape, red, r.kind);
        OwnedTensor y(DType::F32, outShape);
        AttributeList withAxes =
            attrs({intsAttr("axes", axes), intAttr("keepdims", keep)});
        ASSERT_EQ(errorText(runKernel(r.fn, r.op, withAxes, {&x}, {&y}, 11)),
                  "");
        V got = y.f32s();
        for (size_t i = 0; i < expect.size(); ++i)
          EXPECT_FLOAT_EQ(got[i], expect[i]) << r.op << " mask " << mask;
        if (r.kind != Kind::Sum)
          continue;
        OwnedTensor axesIn = OwnedTensor::ints({int64_t(axes.size())}, axes);
        OwnedTensor y13(DType::F32, outShape);
        AttributeList keepOnly = attrs({intAttr("keepdims", keep)});
        ASSERT_EQ(errorText(runKernel(r.fn, r.op, keepOnly, {&x, &axesIn},
                                      {&y13}, 13)),
                  "");
        EXPECT_EQ(y13.f32s(), got);
      }
}

// Sizes that take the threaded paths: rows, columns and a middle axis.
TEST(ReductionKernels, LargeReductions) {
  std::vector<int64_t> shape = {40, 300, 9};
  V xv = ramp(40 * 300 * 9);
  OwnedTensor x = OwnedTensor::f32(shape, xv);
  for (int axis = 0; axis < 3; ++axis) {
    llvm::SmallVector<bool, 3> red = {axis == 0, axis == 1, axis == 2};
    std::vector<int64_t> outShape = shape;
    outShape[axis] = 1;
    for (const Reduce &r : kReduces) {
      OwnedTensor y(DType::F32, outShape);
      AttributeList a = attrs({intsAttr("axes", {axis})});
      ASSERT_EQ(errorText(runKernel(r.fn, r.op, a, {&x}, {&y}, 11)), "");
      V expect = naiveReduce(xv, shape, red, r.kind), got = y.f32s();
      for (size_t i = 0; i < expect.size(); ++i)
        ASSERT_NEAR(got[i], expect[i], 1e-4) << r.op << " axis " << axis;
    }
  }
}

// Empty axes reduce everything, unless noop_with_empty_axes asks for a copy.
TEST(ReductionKernels, EmptyAxes) {
  OwnedTensor x = OwnedTensor::f32({2, 3}, {1, 2, 3, 4, 5, 6});
  OwnedTensor none(DType::I64, {0});
  OwnedTensor all(DType::F32, {1, 1});
  ASSERT_EQ(errorText(runKernel(runReduceSum, "ReduceSum", attrs({}),
                                {&x, &none}, {&all}, 13)),
            "");
  EXPECT_EQ(all.f32s(), V({21}));
  OwnedTensor same(DType::F32, {2, 3});
  AttributeList noop = attrs({intAttr("noop_with_empty_axes", 1)});
  ASSERT_EQ(errorText(runKernel(runReduceSum, "ReduceSum", noop, {&x, &none},
                                {&same}, 13)),
            "");
  EXPECT_EQ(same.f32s(), x.f32s());
  OwnedTensor scalar(DType::F32, {});
  AttributeList flat = attrs({intAttr("keepdims", 0)});
  ASSERT_EQ(
      errorText(runKernel(runReduceMax, "ReduceMax", flat, {&x}, {&scalar})),
      "");
  EXPECT_EQ(scalar.f32s(), V({6}));
}

// f16 sums accumulate wider than f16: 4096 ones, where an f16 running sum
// would stall at 2048.
TEST(ReductionKernels, HalfSumsAccumulateWide) {
  OwnedTensor x = OwnedTensor::of<Half>(DType::F16, {4096}, V(4096, 1));
  OwnedTensor y(DType::F16, {});
  AttributeList flat = attrs({intAttr("keepdims", 0)});
  ASSERT_EQ(errorText(runKernel(runReduceSum, "ReduceSum", flat, {&x}, {&y})),
            "");
  EXPECT_EQ(y.values<Half>(), V({4096}));
  OwnedTensor b = OwnedTensor::of<BFloat16>(DType::BF16, {3}, {1, 2, 4});
  OwnedTensor m(DType::BF16, {});
  ASSERT_EQ(errorText(runKernel(runReduceMean, "ReduceMean", flat, {&b}, {&m})),
            "");
  EXPECT_EQ(m.values<BFloat16>(), V({2.328125})); // bf16(7/3) rounded once
}

// Integers: sums wrap, means truncate toward zero, max is exact.
TEST(ReductionKernels, Integers) {
  OwnedTensor x = OwnedTensor::of<int32_t>(DType::I32, {2, 2}, {-1, -2, 3, 4});
  OwnedTensor y(DType::I32, {2});
  AttributeList a = attrs({intsAttr("axes", {1}), intAttr("keepdims", 0)});
  ASSERT_EQ(errorText(runKernel(runReduceMean, "ReduceMean", a, {&x}, {&y})),
            "");
  EXPECT_EQ(y.values<int32_t>(), V({-1, 3}));
  ASSERT_EQ(errorText(runKernel(runReduceMax, "ReduceMax", a, {&x}, {&y})), "");
  EXPECT_EQ(y.values<int32_t>(), V({-1, 4}));
  OwnedTensor u = OwnedTensor::of<uint8_t>(DType::U8, {3}, {200, 100, 1});
  OwnedTensor us(DType::U8, {1});
  ASSERT_EQ(
      errorText(runKernel(runReduceSum, "ReduceSum", attrs({}), {&u}, {&us})),
      "");
  EXPECT_EQ(us.values<uint8_t>(), V({45}));
}

TEST(ReductionKernels, MaxPropagatesNaN) {
  OwnedTensor x = OwnedTensor::f32({2, 3}, {1, NAN, 3, -INFINITY, -5, -2});
  OwnedTensor y(DType::F32, {2, 1});
  AttributeList a = attrs({intsAttr("axes", {-1})});
  ASSERT_EQ(errorText(runKernel(runReduceMax, "ReduceMax", a, {&x}, {&y})), "");
  EXPECT_TRUE(std::isnan(y.f32s()[0]));
  EXPECT_EQ(y.f32s()[1], -2);
}

TEST(ReductionKernels, Errors) {
  OwnedTensor x = OwnedTensor::f32({2, 3}, {1, 2, 3, 4, 5, 6});
  OwnedTensor y(DType::F32, {2});
  AttributeList keep = attrs({intsAttr("axes", {1})});
  EXPECT_EQ(
      errorText(runKernel(runReduceSum, "ReduceSum", keep, {&x}, {&y}, 11)),
      "ReduceSum: output shape [2], expected [2,1]");
  AttributeList bad = attrs({intsAttr("axes", {2})});
  EXPECT_EQ(
      errorText(runKernel(runReduceSum, "ReduceSum", bad, {&x}, {&y}, 11)),
      "axis 2 is out of range for rank 2");
}

} // namespace
