//===- CudaRowsTest.cpp - LayerNorm, reductions, Transpose, Gather on cuda ===//
//
// With a device, each kernel of Rows.cu and Layout.cu runs on random inputs
// (fixed seeds, odd sizes) and is compared with the cpu kernel for the same
// op. On every machine: the index math of RowsMath.h / LayoutMath.h against
// naive loops, and the argument checks, which must fail before any CUDA call.
//
//===----------------------------------------------------------------------===//
#include "test/unit/cuda/RowsTestHelpers.h"
#include "runtime/cuda/kernels/CudaKernels.h"
#include "runtime/cuda/kernels/RowsMath.h"
#include <set>

using namespace zinc;
using namespace zinc::cuda;
using namespace zinc::cuda::rowstest;
using cpu::test::attrs;
using cpu::test::floatAttr;
using cpu::test::intAttr;
using cpu::test::intsAttr;

namespace {

const DType kFloatTypes[] = {DType::F32, DType::F16, DType::BF16};

/// Row-major index -> multi-index of `shape`.
std::vector<int64_t> unflatten(int64_t e, llvm::ArrayRef<int64_t> shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = e % shape[d];
    e /= shape[d];
  }
  return idx;
}

//===----------------------------------------------------------------------===//
// Host math
//===----------------------------------------------------------------------===//

TEST(CudaRowsMath, TransposeViewMatchesNaiveIndexing) {
  struct Case {
    std::vector<int64_t> shape, perm;
    int rank; // after merging
  };
  const Case cases[] = {{{2, 3, 4}, {0, 2, 1}, 3}, {{2, 3, 4}, {1, 2, 0}, 2},
                        {{5, 1, 7}, {2, 1, 0}, 2}, {{2, 3, 4}, {0, 1, 2}, 1},
                        {{3, 2, 5, 4}, {0, 3, 1, 2}, 3}};
  for (const Case &c : cases) {
    SCOPED_TRACE(formatShape(c.shape) + " by " + formatShape(c.perm));
    StridedView view;
    ASSERT_TRUE(planTranspose(c.shape, c.perm, view));
    EXPECT_EQ(view.rank, c.rank);
    std::vector<int64_t> outShape, inStrides(c.shape.size(), 1);
    for (size_t d = c.shape.size(); d-- > 1;)
      inStrides[d - 1] = inStrides[d] * c.shape[d];
    for (int64_t p : c.perm)
      outShape.push_back(c.shape[p]);
    for (int64_t e = 0; e < numElements(c.shape); ++e) {
      std::vector<int64_t> idx = unflatten(e, outShape);
      int64_t want = 0;
      for (size_t k = 0; k < idx.size(); ++k)
        want += idx[k] * inStrides[c.perm[k]];
      ASSERT_EQ(stridedOffset(view, e), want) << "element " << e;
    }
  }
  StridedView id;
  ASSERT_TRUE(planTranspose({2, 3, 4}, {0, 1, 2}, id));
  EXPECT_TRUE(isIdentityView(id));
  StridedView swap;
  ASSERT_TRUE(planTranspose({6, 40, 50}, {0, 2, 1}, swap));
  EXPECT_TRUE(isBatchedTranspose(swap));
}

TEST(CudaRowsMath, WideningKeepsOffsetsInBytes) {
  // [4, 6, 8] f16 swapping the outer two: rows of 8 halves are 16 bytes.
  StridedView view;
  ASSERT_TRUE(planTranspose({4, 6, 8}, {1, 0, 2}, view));
  StridedView wide = view;
  EXPECT_EQ(widenView(wide, 2, 0, 0), 16);
  EXPECT_EQ(wide.dims[2], 1);
  for (int64_t u = 0; u < 24; ++u)
    EXPECT_EQ(stridedOffset(wide, u) * 16, stridedOffset(view, u * 8) * 2);
  StridedView odd = view;
  EXPECT_EQ(widenView(odd, 2, 4, 0), 4); // misaligned for 8 and 16 bytes
  EXPECT_EQ(widenView(odd = view, 2, 0, 1), 2);
}

TEST(CudaRowsMath, ReducePlanMatchesNaiveSums) {
  struct Case {
    std::vector<int64_t> shape;
    llvm::SmallVector<bool, 4> reduced;
  };
  const Case cases[] = {{{7, 5}, {true, false}},
                        {{7, 5}, {false, true}},
                        {{2, 3, 4, 5}, {false, true, false, true}},
                        {{2, 1, 4, 3}, {true, true, false, true}},
                        {{3, 4}, {false, false}}};
  for (const Case &c : cases) {
    SCOPED_TRACE(formatShape(c.shape));
    ReducePlan plan;
    ASSERT_TRUE(planReduce(c.shape, c.reduced, plan));
    // Naive: the input offsets feeding each output.
    std::vector<std::multiset<int64_t>> want(plan.outCount);
    std::vector<int64_t> outShape;
    for (size_t d = 0; d < c.shape.size(); ++d)
      if (!c.reduced[d])
        outShape.push_back(c.shape[d]);
    for (int64_t e = 0; e < numElements(c.shape); ++e) {
      std::vector<int64_t> idx = unflatten(e, c.shape);
      int64_t o = 0;
      for (size_t d = 0; d < c.shape.size(); ++d)
        if (!c.reduced[d])
          o = o * c.shape[d] + idx[d];
      want[o].insert(e);
    }
    for (int64_t o = 0; o < plan.outCount; ++o) {
      std::multiset<int64_t> got;
      for (int64_t r = 0; r < plan.redCount; ++r)
        got.insert(reduceBase(plan, o) + reduceOffset(plan, r));
      EXPECT_EQ(got, want[o]) << "output " << o;
    }
  }
  ReducePlan bias;
  const bool biasAxes[] = {true, false};
  ASSERT_TRUE(planReduce({300, 17}, biasAxes, bias));
  int64_t outer, red, inner;
  ASSERT_TRUE(reduceAsMiddle(bias, outer, red, inner));
  EXPECT_EQ(outer, 1);
  EXPECT_EQ(red, 300);
  EXPECT_EQ(inner, 17);
  ReducePlan twoGroups;
  const bool twoAxes[] = {false, true, false, true};
  ASSERT_TRUE(planReduce({2, 3, 4, 5}, twoAxes, twoGroups));
  EXPECT_FALSE(reduceAsMiddle(twoGroups, outer, red, inner));
}

TEST(CudaRowsMath, AxesReadingsFromShapes) {
  EXPECT_EQ(reductionsMatching({4, 5}, {5}, false, 1).size(), 1u);
  EXPECT_EQ(reductionsMatching({4, 5}, {1, 5}, true, 1).size(), 1u);
  // [3, 3] to [3]: axis 0 or axis 1, only the device's axes tell.
  EXPECT_EQ(reductionsMatching({3, 3}, {3}, false, 1).size(), 2u);
  EXPECT_TRUE(reductionsMatching({4, 5}, {3}, false, 1).empty());
  int64_t dims[] = {3, 1, 4};
  int64_t axes[] = {-1, 1, 0};
  EXPECT_EQ(effectiveAxesMask(axes, 3, 3, dims), 0b101);
  int32_t bad[] = {3};
  EXPECT_EQ(effectiveAxesMask(bad, 1, 3, dims), -1);
}

TEST(CudaRowsMath, LayerNormFormulasAndAffine) {
  EXPECT_FLOAT_EQ(layerNormValue(3, 1, 0.5f, 2, 1), 3.0f);
  EXPECT_FLOAT_EQ(layerNormInvStd(8, 2, 0), 0.5f);
  // dx for a row [1, 3], scale 1, dy [1, 0]: mean 2, invstd 1.
  float meanG = 0.5f, meanGX = (1 * -1.0f + 0) / 2;
  EXPECT_FLOAT_EQ(layerNormGradValue(1, 1, 1, 2, 1, meanG, meanGX), 0.0f);
  AffineIndex idx;
  llvm::SmallVector<bool, 8> broadcast;
  ASSERT_TRUE(planAffine({1, 1, 20}, {3, 20}, idx, broadcast));
  EXPECT_FALSE(idx.direct);
  EXPECT_EQ(affineIndex(idx, 45), 5);
  EXPECT_TRUE(broadcast[0]);
  ASSERT_TRUE(planAffine({3, 20}, {3, 20}, idx, broadcast));
  EXPECT_TRUE(idx.direct);
  EXPECT_FALSE(planAffine({4, 20}, {3, 20}, idx, broadcast));
}

//===----------------------------------------------------------------------===//
// Argument checks, before any CUDA call
//===----------------------------------------------------------------------===//

TEST(CudaRowsNoDevice, BadCallsFailBeforeLaunching) {
  DeviceTensor x = shapeOnly(DType::F32, {4, 5});
  DeviceTensor y = shapeOnly(DType::F32, {4, 4});
  DeviceTensor s = shapeOnly(DType::F32, {5});
  EXPECT_EQ(errorText(runUnlaunched(runLayerNormalization, "LayerNormalization",
                                    attrs({}), {&x}, {&y})),
            "LayerNormalization: output shape [4,4] differs from input shape "
            "[4,5]");
  DeviceTensor y45 = shapeOnly(DType::F32, {4, 5});
  DeviceTensor s4 = shapeOnly(DType::F32, {4});
  EXPECT_EQ(errorText(runUnlaunched(runLayerNormalization, "LayerNormalization",
                                    attrs({}), {&x, &s4}, {&y45})),
            "unsupported: LayerNormalization with Scale of shape [4] for "
            "normalised shape [5]");
  EXPECT_EQ(errorText(runUnlaunched(runLayerNormalization, "LayerNormalization",
                                    attrs({intAttr("axis", 2)}), {&x, &s},
                                    {&y45})),
            "axis 2 is out of range for rank 2");
  DeviceTensor r = shapeOnly(DType::F32, {3});
  EXPECT_EQ(errorText(runUnlaunched(runReduceSum, "ReduceSum",
                                    attrs({intsAttr("axes", {0}),
                                           intAttr("keepdims", 0)}),
                                    {&x}, {&r}, 11)),
            "ReduceSum: output shape [3], expected [5]");
  DeviceTensor xi = shapeOnly(DType::I64, {4, 5}), ri = shapeOnly(DType::I64, {5});
  EXPECT_EQ(errorText(runUnlaunched(runReduceL2, "ReduceL2",
                                    attrs({intsAttr("axes", {0}), intAttr("keepdims", 0)}),
                                    {&xi}, {&ri}, 11)),
            "unsupported: ReduceL2 of i64 on the cuda backend (f32, f16, bf16)");
  DeviceTensor axes = shapeOnly(DType::I64, {1});
  EXPECT_EQ(errorText(runUnlaunched(runReduceMean, "ReduceMean",
                                    attrs({intAttr("keepdims", 0)}),
                                    {&x, &axes}, {&r}, 18)),
            "ReduceMean: output shape [3] does not follow from input shape "
            "[4,5] with 1 axes and keepdims=0");
  EXPECT_EQ(errorText(runUnlaunched(runTranspose, "Transpose",
                                    attrs({intsAttr("perm", {0, 0})}), {&x},
                                    {&y})),
            "Transpose: perm is not a permutation of 0..1");
  DeviceTensor idx = shapeOnly(DType::I64, {3});
  DeviceTensor g = shapeOnly(DType::F32, {3, 5});
  EXPECT_EQ(errorText(runUnlaunched(runGather, "Gather",
                                    attrs({intAttr("axis", -3)}), {&x, &idx},
                                    {&g})),
            "axis -3 is out of range for rank 2");
  DeviceTensor fidx = shapeOnly(DType::F32, {3});
  EXPECT_EQ(errorText(runUnlaunched(runGather, "Gather", attrs({}),
                                    {&x, &fidx}, {&g})),
            "unsupported: Gather with indices of f32 on the cuda backend "
            "(i32, i64)");
  EXPECT_EQ(errorText(runUnlaunched(runGatherGrad, "GatherGrad",
                                    attrs({intsAttr("shape", {4, 6})}),
                                    {&idx, &g}, {&x})),
            "GatherGrad: dx has shape [4,5], expected [4,6]");
}

//===----------------------------------------------------------------------===//
// With a device: against the cpu kernels
//===----------------------------------------------------------------------===//

Tolerance floatTolerance(DType t) {
  double ulp = halfUlp(t);
  return ulp ? Tolerance{4 * ulp, 2 * ulp} : Tolerance{1e-5, 1e-4};
}

TEST_F(CudaRows, LayerNormalizationMatchesCpu) {
  struct Case {
    std::vector<int64_t> x, scale;
    int64_t axis;
    bool bias, stats;
  };
  const Case cases[] = {{{5, 37}, {37}, -1, true, true},
                        {{3, 4, 129}, {129}, -1, false, true},
                        {{2, 3, 2100}, {2100}, 2, true, false},
                        {{2, 3, 20}, {3, 20}, 1, true, true},
                        {{2, 3, 20}, {1, 20}, 1, true, true}};
  for (DType dtype : kFloatTypes)
    for (const Case &c : cases) {
      SCOPED_TRACE(dtypeName(dtype).str() + " " + formatShape(c.x) +
                   " axis " + std::to_string(c.axis));
      AttributeList a = attrs({intAttr("axis", c.axis),
                               floatAttr("epsilon", 1e-5)});
      OwnedTensor x = randomTensor(dtype, c.x, rng, -2, 3);
      OwnedTensor s = randomTensor(dtype, c.scale, rng, 0.5, 1.5);
      OwnedTensor b = randomTensor(dtype, c.scale, rng, -1, 1);
      int64_t axis = c.axis < 0 ? c.axis + c.x.size() : c.axis;
      std::vector<int64_t> statShape(c.x.begin(), c.x.begin() + axis);
      OwnedTensor y(dtype, c.x), mean(DType::F32, statShape),
          inv(DType::F32, statShape);
      ASSERT_NO_ERROR(runCpu(cpu::lookupKernel("LayerNormalization"),
                             "LayerNormalization", a,
                             {&x, &s, c.bias ? &b : nullptr},
                             {&y, c.stats ? &mean : nullptr,
                              c.stats ? &inv : nullptr}));
      ASSIGN_OR_FAIL(dx, upload(x));
      ASSIGN_OR_FAIL(ds, upload(s));
      ASSIGN_OR_FAIL(db, upload(b));
      ASSIGN_OR_FAIL(dy, allocate(dtype, c.x));
      ASSIGN_OR_FAIL(dm, allocate(DType::F32, statShape));
      ASSIGN_OR_FAIL(di, allocate(DType::F32, statShape));
      ASSERT_NO_ERROR(runDevice(runLayerNormalization, "LayerNormalization",
                                a, {&dx, &ds, c.bias ? &db : nullptr},
                                {&dy, c.stats ? &dm : nullptr,
                                 c.stats ? &di : nullptr}));
      ASSIGN_OR_FAIL(gy, download(dy));
      expectClose(gy, y, floatTolerance(dtype));
      if (c.stats) {
        ASSIGN_OR_FAIL(gm, download(dm));
        ASSIGN_OR_FAIL(gi, download(di));
        expectClose(gm, mean, {1e-5, 1e-4});
        expectClose(gi, inv, {1e-5, 1e-4});
      }
    }
}

TEST_F(CudaRows, LayerNormalizationGradMatchesCpu) {
  struct Case {
    std::vector<int64_t> x, scale;
    int64_t axis;
    bool bias, stats;
  };
  const Case cases[] = {{{5, 37}, {37}, -1, true, true},
                        {{300, 45}, {45}, -1, false, true},
                        {{3, 4, 129}, {129}, -1, true, false},
                        {{2, 3, 20}, {1, 20}, 1, true, true},
                        {{2, 3, 20}, {20}, 1, true, false}};
  for (DType dtype : kFloatTypes)
    for (const Case &c : cases) {
      SCOPED_TRACE(dtypeName(dtype).str() + " " + formatShape(c.x) +
                   " scale " + formatShape(c.scale));
      AttributeList a = attrs({intAttr("axis", c.axis)});
      OwnedTensor x = randomTensor(dtype, c.x, rng, -2, 3);
      OwnedTensor dy = randomTensor(dtype, c.x, rng, -1, 1);
      OwnedTensor s = randomTensor(dtype, c.scale, rng, 0.5, 1.5);
      int64_t axis = c.axis < 0 ? c.axis + c.x.size() : c.axis;
      std::vector<int64_t> statShape(c.x.begin(), c.x.begin() + axis);
      // The statistics, as the forward kernel gives them.
      OwnedTensor y(dtype, c.x), mean(DType::F32, statShape),
          inv(DType::F32, statShape);
      ASSERT_NO_ERROR(runCpu(cpu::lookupKernel("LayerNormalization"),
                             "LayerNormalization", a, {&x, &s},
                             {&y, &mean, &inv}));
      OwnedTensor dx(dtype, c.x), dscale(dtype, c.scale),
          dbias(dtype, c.scale);
      const OwnedTensor *m = c.stats ? &mean : nullptr,
                        *i = c.stats ? &inv : nullptr;
      ASSERT_NO_ERROR(runCpu(cpu::lookupZincKernel("LayerNormalizationGrad"),
                             "LayerNormalizationGrad", a, {&dy, &x, &s, m, i},
                             {&dx, &dscale, c.bias ? &dbias : nullptr}));
      ASSIGN_OR_FAIL(gx, upload(x));
      ASSIGN_OR_FAIL(gdy, upload(dy));
      ASSIGN_OR_FAIL(gs, upload(s));
      ASSIGN_OR_FAIL(gm, upload(mean));
      ASSIGN_OR_FAIL(gi, upload(inv));
      ASSIGN_OR_FAIL(gdx, allocate(dtype, c.x));
      ASSIGN_OR_FAIL(gds, allocate(dtype, c.scale));
      ASSIGN_OR_FAIL(gdb, allocate(dtype, c.scale));
      ASSERT_NO_ERROR(runDevice(
          runLayerNormalizationGrad, "LayerNormalizationGrad", a,
          {&gdy, &gx, &gs, c.stats ? &gm : nullptr, c.stats ? &gi : nullptr},
          {&gdx, &gds, c.bias ? &gdb : nullptr}));
      Tolerance tol = floatTolerance(dtype);
      ASSIGN_OR_FAIL(hdx, download(gdx));
      expectClose(hdx, dx, {tol.atol * 4, tol.rtol * 4});
      // Column sums over up to 300 rows: a larger absolute slack.
      ASSIGN_OR_FAIL(hds, download(gds));
      expectClose(hds, dscale, {tol.atol * 16, tol.rtol * 2});
      if (c.bias) {
        ASSIGN_OR_FAIL(hdb, download(gdb));
        expectClose(hdb, dbias, {tol.atol * 16, tol.rtol * 2});
      }
    }
}

TEST_F(CudaRows, ReductionsMatchCpu) {
  struct Case {
    std::vector<int64_t> x;
    std::vector<int64_t> axes;
    bool keepdims;
    bool asInput;
  };
  const Case cases[] = {
      {{300, 17}, {0}, false, true},         // bias gradient: columns
      {{7, 45}, {1}, true, false},           // rows
      {{7, 45}, {-1}, false, true},          // rows, negative axis
      {{2, 3, 4, 5}, {1, 3}, true, true},    // generic
      {{2, 3, 4, 5}, {0, 2, 3}, false, false},
      {{6, 6}, {0}, false, true},            // ambiguous: axis 0
      {{6, 6}, {-1}, false, true},           // ambiguous: axis 1
      {{5, 1, 9}, {}, false, false},         // all axes
      {{40, 3, 33}, {0, 2}, false, true}};
  const char *ops[] = {"ReduceSum", "ReduceMean", "ReduceL2"};
  for (const char *op : ops)
    for (DType dtype : {DType::F32, DType::F16, DType::BF16, DType::I64})
      for (const Case &c : cases) {
        if (std::string(op) == "ReduceL2" && dtype == DType::I64)
          continue; // floats only on the cuda backend (refused above)
        SCOPED_TRACE(std::string(op) + " " + dtypeName(dtype).str() + " " +
                     formatShape(c.x) + " axes " + formatShape(c.axes) +
                     (c.asInput ? " (input)" : ""));
        int64_t opset = c.asInput ? 18 : 11;
        AttributeList a = attrs({intAttr("keepdims", c.keepdims)});
        if (!c.asInput && !c.axes.empty())
          a.set(intsAttr("axes", c.axes));
        std::vector<int64_t> outShape;
        for (int64_t d = 0; d < static_cast<int64_t>(c.x.size()); ++d) {
          bool red = c.axes.empty();
          for (int64_t ax : c.axes)
            red |= (ax < 0 ? ax + static_cast<int64_t>(c.x.size()) : ax) == d;
          if (!red)
            outShape.push_back(c.x[d]);
          else if (c.keepdims)
            outShape.push_back(1);
        }
        OwnedTensor x =
            randomTensor(dtype, c.x, rng, -4, 4, DrawKind::FlooredForIntegers);
        OwnedTensor axes = OwnedTensor::ints({int64_t(c.axes.size())}, c.axes);
        OwnedTensor want(dtype, outShape);
        const OwnedTensor *axesIn = c.asInput ? &axes : nullptr;
        ASSERT_NO_ERROR(runCpu(cpu::lookupKernel(op), op, a, {&x, axesIn},
                               {&want}, opset));
        ASSIGN_OR_FAIL(gx, upload(x));
        ASSIGN_OR_FAIL(gaxes, upload(axes));
        ASSIGN_OR_FAIL(gy, allocate(dtype, outShape));
        ASSERT_NO_ERROR(runDevice(lookupCudaKernel("", op), op, a,
                                  {&gx, c.asInput ? &gaxes : nullptr}, {&gy},
                                  opset));
        ASSIGN_OR_FAIL(got, download(gy));
        double ulp = halfUlp(dtype);
        expectClose(got, want,
                    dtype == DType::I64 ? Tolerance{0, 0}
                    : ulp               ? Tolerance{2 * ulp, ulp}
                                        : Tolerance{1e-4, 1e-5});
      }
}

TEST_F(CudaRows, NoopReductionCopies) {
  AttributeList a = attrs({intAttr("noop_with_empty_axes", 1)});
  OwnedTensor x = randomTensor(DType::F32, {3, 7}, rng, -1, 1);
  OwnedTensor axes = OwnedTensor::ints({0}, {});
  ASSIGN_OR_FAIL(gx, upload(x));
  ASSIGN_OR_FAIL(gaxes, upload(axes));
  ASSIGN_OR_FAIL(gy, allocate(DType::F32, {3, 7}));
  ASSERT_NO_ERROR(
      runDevice(runReduceSum, "ReduceSum", a, {&gx, &gaxes}, {&gy}, 13));
  ASSIGN_OR_FAIL(got, download(gy));
  expectClose(got, x, {0, 0});
}

TEST_F(CudaRows, TransposeMatchesCpu) {
  struct Case {
    std::vector<int64_t> shape, perm;
  };
  const Case cases[] = {{{37, 45}, {1, 0}},          // tiled
                        {{3, 33, 70}, {0, 2, 1}},    // batched tiled
                        {{2, 33, 17, 3}, {0, 3, 1, 2}},
                        {{4, 6, 8}, {1, 0, 2}},      // rows move whole
                        {{5, 1, 7}, {2, 1, 0}},
                        {{2, 3, 4}, {0, 1, 2}},      // a copy
                        {{2, 3, 2, 3, 2, 3, 2}, {6, 5, 4, 3, 2, 1, 0}}};
  for (DType dtype : {DType::F32, DType::F16, DType::I64, DType::U8})
    for (const Case &c : cases) {
      SCOPED_TRACE(dtypeName(dtype).str() + " " + formatShape(c.shape) +
                   " by " + formatShape(c.perm));
      AttributeList a = attrs({intsAttr("perm", c.perm)});
      OwnedTensor x = randomTensor(dtype, c.shape, rng, 0, 100,
                                   DrawKind::FlooredForIntegers);
      std::vector<int64_t> outShape;
      for (int64_t p : c.perm)
        outShape.push_back(c.shape[p]);
      OwnedTensor want(dtype, outShape);
      ASSERT_NO_ERROR(
          runCpu(cpu::lookupKernel("Transpose"), "Transpose", a, {&x}, {&want}));
      ASSIGN_OR_FAIL(gx, upload(x));
      ASSIGN_OR_FAIL(gy, allocate(dtype, outShape));
      ASSERT_NO_ERROR(runDevice(runTranspose, "Transpose", a, {&gx}, {&gy}));
      ASSIGN_OR_FAIL(got, download(gy));
      expectClose(got, want, {0, 0});
    }
}

TEST_F(CudaRows, GatherAndItsGradMatchCpu) {
  struct Case {
    std::vector<int64_t> data, indicesShape;
    int64_t axis;
    DType indexType;
  };
  const Case cases[] = {{{50, 16}, {3, 7}, 0, DType::I64},  // embedding
                        {{4, 10, 3}, {6}, 1, DType::I32},
                        {{4, 10, 5}, {2, 3}, -2, DType::I64},
                        {{9, 300}, {40}, 0, DType::I32},    // two column chunks
                        {{7}, {5}, 0, DType::I64}};
  for (DType dtype : kFloatTypes)
    for (const Case &c : cases) {
      SCOPED_TRACE(dtypeName(dtype).str() + " " + formatShape(c.data) +
                   " axis " + std::to_string(c.axis));
      int64_t axis = c.axis < 0 ? c.axis + c.data.size() : c.axis;
      int64_t dim = c.data[axis];
      // Repeated and negative indices.
      std::vector<double> idx(numElements(c.indicesShape));
      std::uniform_int_distribution<int64_t> pick(-dim, dim - 1);
      for (double &v : idx)
        v = static_cast<double>(pick(rng) % 4);
      OwnedTensor indices = tensorOf(c.indexType, c.indicesShape, idx);
      OwnedTensor data = randomTensor(dtype, c.data, rng, -2, 2);
      std::vector<int64_t> outShape(c.data.begin(), c.data.begin() + axis);
      outShape.insert(outShape.end(), c.indicesShape.begin(),
                      c.indicesShape.end());
      outShape.insert(outShape.end(), c.data.begin() + axis + 1, c.data.end());
      AttributeList a = attrs({intAttr("axis", c.axis)});
      OwnedTensor want(dtype, outShape);
      ASSERT_NO_ERROR(runCpu(cpu::lookupKernel("Gather"), "Gather", a,
                             {&data, &indices}, {&want}));
      ASSIGN_OR_FAIL(gdata, upload(data));
      ASSIGN_OR_FAIL(gidx, upload(indices));
      ASSIGN_OR_FAIL(gout, allocate(dtype, outShape));
      ASSERT_NO_ERROR(
          runDevice(runGather, "Gather", a, {&gdata, &gidx}, {&gout}));
      ASSIGN_OR_FAIL(got, download(gout));
      expectClose(got, want, {0, 0});

      AttributeList ga = attrs({intAttr("axis", c.axis),
                                intsAttr("shape", c.data)});
      OwnedTensor dy = randomTensor(dtype, outShape, rng, -1, 1);
      OwnedTensor dx(dtype, c.data);
      ASSERT_NO_ERROR(runCpu(cpu::lookupZincKernel("GatherGrad"), "GatherGrad",
                             ga, {&indices, &dy}, {&dx}));
      ASSIGN_OR_FAIL(gdy, upload(dy));
      ASSIGN_OR_FAIL(gdx, allocate(dtype, c.data));
      ASSERT_NO_ERROR(
          runDevice(runGatherGrad, "GatherGrad", ga, {&gidx, &gdy}, {&gdx}));
      ASSIGN_OR_FAIL(gotDx, download(gdx));
      double ulp = halfUlp(dtype);
      expectClose(gotDx, dx, ulp ? Tolerance{ulp, ulp} : Tolerance{1e-6, 1e-6});
    }
}

} // namespace
