//===- DataMovementTest.cpp - Transpose, Gather, Slice, Concat, Split... --===//
#include "test/unit/kernels/KernelCallHelpers.h"
#include <gtest/gtest.h>
#include <limits>
#include <numeric>

using namespace zinc;
using namespace zinc::cpu;
using namespace zinc::cpu::test;

namespace {

using V = std::vector<double>;
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

/// Transposes an iota tensor of `shape` by `perm` the obvious way.
V naiveTranspose(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> perm) {
  llvm::SmallVector<int64_t, 6> inStrides = contiguousStrides(shape), outShape;
  for (int64_t p : perm)
    outShape.push_back(shape[p]);
  int64_t total = numElements(shape);
  V out(total);
  llvm::SmallVector<int64_t, 6> idx(perm.size(), 0);
  for (int64_t i = 0; i < total; ++i) {
    int64_t rem = i, src = 0;
    for (size_t d = perm.size(); d-- > 0;) {
      idx[d] = rem % outShape[d];
      rem /= outShape[d];
      src += idx[d] * inStrides[perm[d]];
    }
    out[i] = static_cast<double>(src);
  }
  return out;
}

// Every permutation of a rank-3 and a rank-4 tensor, in 1-, 2-, 4- and
// 8-byte types; sizes large enough to take the tiled path too.
TEST(DataMovementKernels, TransposeMatchesNaive) {
  std::vector<int64_t> shapes[] = {{3, 37, 45}, {2, 3, 40, 33}};
  for (const auto &shape : shapes) {
    std::vector<int64_t> perm(shape.size());
    std::iota(perm.begin(), perm.end(), 0);
    do {
      std::vector<int64_t> outShape;
      for (int64_t p : perm)
        outShape.push_back(shape[p]);
      V expected = naiveTranspose(shape, perm);
      AttributeList a = attrs({intsAttr("perm", perm)});
      OwnedTensor f = OwnedTensor::iota<float>(DType::F32, shape);
      OwnedTensor fo(DType::F32, outShape);
      ASSERT_EQ(errorText(runKernel(runTranspose, "Transpose", a, {&f}, {&fo})),
                "");
      EXPECT_EQ(fo.f32s(), expected);
      OwnedTensor d = OwnedTensor::iota<int64_t>(DType::I64, shape);
      OwnedTensor dout(DType::I64, outShape);
      ASSERT_EQ(
          errorText(runKernel(runTranspose, "Transpose", a, {&d}, {&dout})),
          "");
      EXPECT_EQ(dout.i64s(), expected);
      OwnedTensor s = OwnedTensor::iota<int16_t>(DType::I16, shape);
      OwnedTensor sout(DType::I16, outShape);
      ASSERT_EQ(
          errorText(runKernel(runTranspose, "Transpose", a, {&s}, {&sout})),
          "");
      // int16 iota wraps past 32767 the same way in both.
      V wrapped;
      for (double v : expected)
        wrapped.push_back(static_cast<int16_t>(static_cast<int64_t>(v)));
      EXPECT_EQ(sout.values<int16_t>(), wrapped);
    } while (std::next_permutation(perm.begin(), perm.end()));
  }
}

// Big enough (several MiB) to be split across threads; the ranges must
// start their walks at the right index.
TEST(DataMovementKernels, LargeTransposeAndSliceMatchNaive) {
  std::vector<int64_t> shape = {3, 301, 617}, perm = {0, 2, 1};
  OwnedTensor in = OwnedTensor::iota<int32_t>(DType::I32, shape);
  OwnedTensor out(DType::I32, {3, 617, 301});
  ASSERT_EQ(
      errorText(runKernel(runTranspose, "Transpose",
                          attrs({intsAttr("perm", perm)}), {&in}, {&out})),
      "");
  EXPECT_EQ(out.values<int32_t>(), naiveTranspose(shape, perm));

  // Every third column backwards: a strided row gather.
  OwnedTensor s = OwnedTensor::ints({1}, {-1}), e = OwnedTensor::ints({1}, {0});
  OwnedTensor a = OwnedTensor::ints({1}, {2}),
              st = OwnedTensor::ints({1}, {-3});
  OwnedTensor sliced(DType::I32, {3, 301, 206});
  ASSERT_EQ(errorText(runKernel(runSlice, "Slice", {}, {&in, &s, &e, &a, &st},
                                {&sliced}, 13)),
            "");
  V expected;
  for (int64_t r = 0; r < 3 * 301; ++r)
    for (int64_t j = 616; j > 0; j -= 3)
      expected.push_back(static_cast<double>(r * 617 + j));
  EXPECT_EQ(sliced.values<int32_t>(), expected);
}

TEST(DataMovementKernels, TransposeDefaultReversesAndChecksPerm) {
  OwnedTensor in = OwnedTensor::iota<uint8_t>(DType::U8, {2, 3, 4});
  OwnedTensor out(DType::U8, {4, 3, 2});
  ASSERT_EQ(errorText(runKernel(runTranspose, "Transpose", {}, {&in}, {&out})),
            "");
  EXPECT_EQ(out.values<uint8_t>(), naiveTranspose({2, 3, 4}, {2, 1, 0}));
  EXPECT_NE(
      errorText(runKernel(runTranspose, "Transpose",
                          attrs({intsAttr("perm", {0, 0, 1})}), {&in}, {&out})),
      "");
}

TEST(DataMovementKernels, GatherAxisAndNegativeIndices) {
  // data [2, 3, 2], gather along axis 1 with 2-D indices [[2, -3]].
  OwnedTensor data = OwnedTensor::iota<int32_t>(DType::I32, {2, 3, 2});
  OwnedTensor idx = OwnedTensor::of<int32_t>(DType::I32, {1, 2}, {2, -3});
  OwnedTensor out(DType::I32, {2, 1, 2, 2});
  ASSERT_EQ(
      errorText(runKernel(runGather, "Gather", attrs({intAttr("axis", -2)}),
                          {&data, &idx}, {&out})),
      "");
  EXPECT_EQ(out.values<int32_t>(), (V{4, 5, 0, 1, 10, 11, 6, 7}));

  // Scalar index on the last axis of a bool tensor.
  OwnedTensor flags = OwnedTensor::of<bool>(DType::Bool, {2, 2}, {1, 0, 0, 1});
  OwnedTensor one = OwnedTensor::i64({}, {1});
  OwnedTensor col(DType::Bool, {2});
  ASSERT_EQ(
      errorText(runKernel(runGather, "Gather", attrs({intAttr("axis", 1)}),
                          {&flags, &one}, {&col})),
      "");
  EXPECT_EQ(col.values<bool>(), (V{0, 1}));
}

TEST(DataMovementKernels, GatherNamesOutOfRangeIndex) {
  OwnedTensor data = OwnedTensor::f32({3}, {1, 2, 3});
  OwnedTensor idx = OwnedTensor::i64({2}, {0, -4});
  OwnedTensor out(DType::F32, {2});
  EXPECT_EQ(
      errorText(runKernel(runGather, "Gather", {}, {&data, &idx}, {&out})),
      "Gather: index -4 at position 1 is out of range for axis 0 of "
      "size 3");
}

/// Runs Slice (opset 13) on iota [4, 5] and returns the output.
using Ints = std::vector<int64_t>;
V slice2d(Ints starts, Ints ends, Ints axes, Ints steps, Ints outShape) {
  OwnedTensor in = OwnedTensor::iota<float>(DType::F32, {4, 5});
  int64_t n = static_cast<int64_t>(starts.size());
  OwnedTensor s = OwnedTensor::ints({n}, starts),
              e = OwnedTensor::ints({n}, ends);
  OwnedTensor a = OwnedTensor::ints({n}, axes),
              st = OwnedTensor::ints({n}, steps);
  OwnedTensor out(DType::F32, outShape);
  llvm::Error err =
      runKernel(runSlice, "Slice", {}, {&in, &s, &e, &a, &st}, {&out}, 13);
  EXPECT_EQ(errorText(std::move(err)), "");
  return out.f32s();
}

TEST(DataMovementKernels, SliceInputs) {
  // Rows 1..2, every other column from 0.
  EXPECT_EQ(slice2d({1, 0}, {3, 5}, {0, 1}, {1, 2}, {2, 3}),
            (V{5, 7, 9, 10, 12, 14}));
  // Negative steps walk backwards; INT64_MIN ends at the front.
  EXPECT_EQ(slice2d({-1, 4}, {kMin, 0}, {0, -1}, {-2, -3}, {2, 2}),
            (V{19, 16, 9, 6}));
  // Out-of-range starts and ends clamp; INT64_MAX means "to the end".
  EXPECT_EQ(slice2d({-100, 3}, {kMax, 100}, {0, 1}, {3, 1}, {2, 2}),
            (V{3, 4, 18, 19}));
  // Steps of INT64_MIN/MAX take one element.
  EXPECT_EQ(slice2d({-1, 0}, {kMin, kMax}, {0, 1}, {kMin, kMax}, {1, 1}),
            (V{15}));
  // A start past the end gives an empty slice.
  EXPECT_EQ(slice2d({7}, {9}, {1}, {1}, {4, 0}), V{});
}

TEST(DataMovementKernels, SliceAttributesBeforeOpset10) {
  OwnedTensor in = OwnedTensor::iota<Half>(DType::F16, {3, 4});
  OwnedTensor out(DType::F16, {3, 2});
  AttributeList a = attrs({intsAttr("starts", {1}), intsAttr("ends", {-1}),
                           intsAttr("axes", {-1})});
  ASSERT_EQ(errorText(runKernel(runSlice, "Slice", a, {&in}, {&out}, 9)), "");
  EXPECT_EQ(out.values<Half>(), (V{1, 2, 5, 6, 9, 10}));
}

TEST(DataMovementKernels, SliceErrors) {
  OwnedTensor in = OwnedTensor::iota<float>(DType::F32, {4});
  OwnedTensor s = OwnedTensor::i64({1}, {0}), e = OwnedTensor::i64({1}, {4});
  OwnedTensor a = OwnedTensor::i64({1}, {0}), zero = OwnedTensor::i64({1}, {0});
  OwnedTensor out(DType::F32, {4});
  EXPECT_NE(errorText(runKernel(runSlice, "Slice", {}, {&in, &s, &e, &a, &zero},
                                {&out}, 13))
                .find("step is zero"),
            std::string::npos);
  OwnedTensor s2 = OwnedTensor::i64({2}, {0, 0}),
              e2 = OwnedTensor::i64({2}, {4, 4});
  OwnedTensor a2 = OwnedTensor::i64({2}, {0, -1});
  EXPECT_NE(errorText(runKernel(runSlice, "Slice", {}, {&in, &s2, &e2, &a2},
                                {&out}, 13))
                .find("appears twice"),
            std::string::npos);
  OwnedTensor wrong(DType::F32, {3});
  EXPECT_NE(
      errorText(runKernel(runSlice, "Slice", {}, {&in, &s, &e}, {&wrong}, 13)),
      "");
}

TEST(DataMovementKernels, ConcatAlongLastAxisWithEmptyInput) {
  OwnedTensor a = OwnedTensor::of<int16_t>(DType::I16, {2, 1}, {1, 2});
  OwnedTensor empty(DType::I16, {2, 0});
  OwnedTensor b = OwnedTensor::of<int16_t>(DType::I16, {2, 2}, {3, 4, 5, 6});
  OwnedTensor out(DType::I16, {2, 3});
  ASSERT_EQ(
      errorText(runKernel(runConcat, "Concat", attrs({intAttr("axis", -1)}),
                          {&a, &empty, &b}, {&out})),
      "");
  EXPECT_EQ(out.values<int16_t>(), (V{1, 3, 4, 2, 5, 6}));

  OwnedTensor bad = OwnedTensor::of<int16_t>(DType::I16, {3, 1}, {1, 2, 3});
  EXPECT_NE(
      errorText(runKernel(runConcat, "Concat", attrs({intAttr("axis", 1)}),
                          {&a, &bad}, {&out})),
      "");
}

TEST(DataMovementKernels, SplitVariants) {
  OwnedTensor in = OwnedTensor::iota<double>(DType::F64, {2, 6});
  // Equal parts.
  {
    OwnedTensor a(DType::F64, {2, 2}), b(DType::F64, {2, 2}),
        c(DType::F64, {2, 2});
    ASSERT_EQ(
        errorText(runKernel(runSplit, "Split", attrs({intAttr("axis", 1)}),
                            {&in}, {&a, &b, &c}, 13)),
        "");
    EXPECT_EQ(a.values<double>(), (V{0, 1, 6, 7}));
    EXPECT_EQ(c.values<double>(), (V{4, 5, 10, 11}));
  }
  // The split input (opset 13) and the split attribute (opset 11).
  OwnedTensor sizes = OwnedTensor::i64({2}, {1, 5});
  for (int64_t opset : {11, 13}) {
    OwnedTensor a(DType::F64, {2, 1}), b(DType::F64, {2, 5});
    AttributeList at = attrs({intAttr("axis", -1)});
    if (opset < 13)
      at.set(intsAttr("split", {1, 5}));
    ASSERT_EQ(errorText(runKernel(runSplit, "Split", at,
                                  {&in, opset < 13 ? nullptr : &sizes},
                                  {&a, &b}, opset)),
              "");
    EXPECT_EQ(a.values<double>(), (V{0, 6}));
    EXPECT_EQ(b.values<double>(), (V{1, 2, 3, 4, 5, 7, 8, 9, 10, 11}));
  }
  // Opset 18's num_outputs: the last part is smaller.
  {
    OwnedTensor five = OwnedTensor::iota<double>(DType::F64, {1, 5});
    OwnedTensor a(DType::F64, {1, 3}), b(DType::F64, {1, 2});
    ASSERT_EQ(errorText(runKernel(
                  runSplit, "Split",
                  attrs({intAttr("axis", 1), intAttr("num_outputs", 2)}),
                  {&five}, {&a, &b}, 18)),
              "");
    EXPECT_EQ(a.values<double>(), (V{0, 1, 2}));
    EXPECT_EQ(b.values<double>(), (V{3, 4}));
  }
  // Six does not split into four equal parts.
  OwnedTensor p(DType::F64, {2, 1});
  EXPECT_NE(errorText(runKernel(runSplit, "Split", attrs({intAttr("axis", 1)}),
                                {&in}, {&p, &p, &p, &p}, 13)),
            "");
}

TEST(DataMovementKernels, ExpandBroadcasts) {
  OwnedTensor in = OwnedTensor::of<int64_t>(DType::I64, {3, 1}, {1, 2, 3});
  OwnedTensor shape = OwnedTensor::i64({3}, {2, 1, 2});
  OwnedTensor out(DType::I64, {2, 3, 2});
  ASSERT_EQ(
      errorText(runKernel(runExpand, "Expand", {}, {&in, &shape}, {&out})), "");
  EXPECT_EQ(out.i64s(), (V{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}));

  // A row broadcast down many rows.
  OwnedTensor row = OwnedTensor::f32({1, 3}, {1, 2, 3});
  OwnedTensor rowShape = OwnedTensor::i64({2}, {2, 1});
  OwnedTensor rows(DType::F32, {2, 3});
  ASSERT_EQ(
      errorText(runKernel(runExpand, "Expand", {}, {&row, &rowShape}, {&rows})),
      "");
  EXPECT_EQ(rows.f32s(), (V{1, 2, 3, 1, 2, 3}));

  OwnedTensor bad(DType::I64, {2, 2});
  EXPECT_NE(errorText(runKernel(runExpand, "Expand", {}, {&in}, {&bad})), "");
}

// Trilu against the definition, batched, for diagonals on and off the
// matrix.
TEST(DataMovementKernels, TriluMatchesDefinition) {
  const int64_t b = 2, r = 3, c = 4;
  OwnedTensor in = OwnedTensor::iota<int32_t>(DType::I32, {b, r, c});
  for (int64_t upper : {0, 1})
    for (int64_t k = -5; k <= 5; ++k) {
      OwnedTensor kt = OwnedTensor::i64({}, {static_cast<double>(k)});
      OwnedTensor out(DType::I32, {b, r, c});
      std::fill_n(out.ref.as<int32_t>(), b * r * c, -1);
      ASSERT_EQ(errorText(runKernel(runTrilu, "Trilu",
                                    attrs({intAttr("upper", upper)}),
                                    {&in, &kt}, {&out})),
                "");
      V expected;
      for (int64_t n = 0; n < b; ++n)
        for (int64_t i = 0; i < r; ++i)
          for (int64_t j = 0; j < c; ++j) {
            bool keep = upper ? j - i >= k : j - i <= k;
            expected.push_back(keep ? (n * r + i) * c + j : 0);
          }
      EXPECT_EQ(out.values<int32_t>(), expected)
          << "upper " << upper << " k " << k;
    }
}

TEST(DataMovementKernels, TriluDefaultIsUpperMainDiagonal) {
  OwnedTensor in = OwnedTensor::f32({2, 2}, {1, 2, 3, 4});
  OwnedTensor out(DType::F32, {2, 2});
  ASSERT_EQ(errorText(runKernel(runTrilu, "Trilu", {}, {&in}, {&out})), "");
  EXPECT_EQ(out.f32s(), (V{1, 2, 0, 4}));
}

} // namespace

TEST(DataMovementKernels, ElementwiseIndexingStaysInsideTheData) {
  // Their coordinates off the axis address the data directly: an indices
  // (or updates) axis longer than the data's would read (write) past it.
  OwnedTensor data(DType::F32, {2, 3});
  OwnedTensor indices = OwnedTensor::ints({3, 2}, {0, 1, 0, 1, 0, 1});
  OwnedTensor out(DType::F32, {3, 2});
  EXPECT_EQ(errorText(runKernel(runGatherElements, "GatherElements",
                                attrs({intAttr("axis", 1)}), {&data, &indices}, {&out})),
            "GatherElements: indices shape [3,2] exceeds the data's [2,3] on axis 0");
  OwnedTensor updates(DType::F32, {3, 2});
  OwnedTensor scattered(DType::F32, {2, 3});
  EXPECT_EQ(errorText(runKernel(runScatterElements, "ScatterElements",
                                attrs({intAttr("axis", 1)}), {&data, &indices, &updates},
                                {&scattered})),
            "ScatterElements: updates shape [3,2] exceeds the data's [2,3] on axis 0");
}
