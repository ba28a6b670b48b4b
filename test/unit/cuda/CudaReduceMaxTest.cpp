//===- CudaReduceMaxTest.cpp - ReduceMax and ReduceMaxGrad: cuda vs cpu ---===//
//
// On every machine: the generic kernels' walk (RowsMath.h's plans with
// MiscMath.h's maximum and tie sharing) run on the host against the cpu
// kernels, with NaN and ties; and the argument checks, which fail with the
// cpu's messages before any CUDA call. With a device: both kernels against
// the cpu kernels on every layout (rows, columns, generic, ambiguous axes
// read on the device), with axes as an attribute or an input in device or
// host memory.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/kernels/MiscMath.h"
#include "runtime/cuda/kernels/RowsMath.h"
#include "test/unit/cuda/MiscTestHelpers.h"
#include <cmath>
#include <limits>

using namespace zinc;
using namespace zinc::cuda;
using namespace zinc::cuda::misctest;
using cpu::test::attrs;
using cpu::test::intAttr;
using cpu::test::intsAttr;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

struct AxesCase {
  std::vector<int64_t> x, axes;
  bool keepdims;
};

/// The output shape of reducing `x` over `axes` (all when empty).
std::vector<int64_t> reducedShape(const std::vector<int64_t> &x,
                                  const std::vector<int64_t> &axes,
                                  bool keepdims) {
  std::vector<int64_t> out;
  int64_t rank = static_cast<int64_t>(x.size());
  for (int64_t d = 0; d < rank; ++d) {
    bool red = axes.empty();
    for (int64_t a : axes)
      red |= (a < 0 ? a + rank : a) == d;
    if (!red)
      out.push_back(x[d]);
    else if (keepdims)
      out.push_back(1);
  }
  return out;
}

/// Which dimensions `axes` reduce.
llvm::SmallVector<bool, 8> reducedDims(const std::vector<int64_t> &x,
                                       const std::vector<int64_t> &axes) {
  int64_t rank = static_cast<int64_t>(x.size());
  llvm::SmallVector<bool, 8> red(rank, axes.empty());
  for (int64_t a : axes)
    red[a < 0 ? a + rank : a] = true;
  return red;
}

/// `t` with NaN at every `every`-th element (floats only).
OwnedTensor withNaNs(const OwnedTensor &t, size_t every) {
  std::vector<double> v = valuesOf(t);
  for (size_t i = 3; i < v.size(); i += every)
    v[i] = kNaN;
  return tensorOf(t.ref.dtype, t.ref.shape, v);
}

//===----------------------------------------------------------------------===//
// The kernels' walk on the host
//===----------------------------------------------------------------------===//

TEST(CudaReduceMaxMath, NaNWinsAndTiesShare) {
  EXPECT_EQ(misc::maxCombine(1.0f, 3.0f), 3.0f);
  EXPECT_EQ(misc::maxCombine(3.0f, 1.0f), 3.0f);
  EXPECT_TRUE(std::isnan(misc::maxCombine(3.0f, float(kNaN))));
  EXPECT_TRUE(std::isnan(misc::maxCombine(float(kNaN), 3.0f)));
  EXPECT_EQ(misc::maxCombine<int64_t>(-5, -7), -5);
  EXPECT_EQ(misc::reduceMaxGradValue(2.0f, 2.0f, 3.0f, 4), 0.75f);
  EXPECT_EQ(misc::reduceMaxGradValue(1.0f, 2.0f, 3.0f, 4), 0.0f);
  EXPECT_EQ(misc::reduceMaxGradValue(float(kNaN), float(kNaN), 3.0f, 0), 0.0f);
}

const AxesCase kPlanCases[] = {
    {{7, 45}, {1}, true},         {{300, 17}, {0}, false},
    {{2, 3, 4, 5}, {1, 3}, true}, {{2, 3, 4, 5}, {0, 2, 3}, false},
    {{5, 1, 9}, {}, false},       {{3, 4}, {1}, true}};

TEST(CudaReduceMaxMath, PlannedWalkMatchesCpu) {
  std::mt19937 rng(7);
  for (const AxesCase &c : kPlanCases) {
    SCOPED_TRACE(formatShape(c.x) + " axes " + formatShape(c.axes));
    OwnedTensor x = withNaNs(
        randomTensor(DType::F32, c.x, rng, -3, 3, DrawKind::Floored), 97);
    std::vector<int64_t> outShape = reducedShape(c.x, c.axes, c.keepdims);
    OwnedTensor want(DType::F32, outShape);
    AttributeList a = attrs({intAttr("keepdims", c.keepdims)});
    if (!c.axes.empty())
      a.set(intsAttr("axes", c.axes));
    ASSERT_NO_ERROR(runCpu(cpu::lookupKernel("ReduceMax"), "ReduceMax", a, {&x},
                           {&want}, 13));
    ReducePlan p;
    ASSERT_TRUE(planReduce(c.x, reducedDims(c.x, c.axes), p));
    ASSERT_EQ(p.outCount, want.ref.numElements());
    std::vector<double> xs = x.f32s(), ws = want.f32s();
    for (int64_t o = 0; o < p.outCount; ++o) {
      float m = -std::numeric_limits<float>::infinity();
      for (int64_t r = 0; r < p.redCount; ++r)
        m = misc::maxCombine(m,
                             float(xs[reduceBase(p, o) + reduceOffset(p, r)]));
      EXPECT_TRUE(m == ws[o] || (std::isnan(m) && std::isnan(ws[o])))
          << "output " << o << ": " << m << ", cpu " << ws[o];
    }
  }
}

TEST(CudaReduceMaxMath, PlannedGradMatchesCpu) {
  std::mt19937 rng(11);
  for (const AxesCase &c : kPlanCases) {
    SCOPED_TRACE(formatShape(c.x) + " axes " + formatShape(c.axes));
    // Few distinct values: many ties.
    OwnedTensor x = randomTensor(DType::F32, c.x, rng, 0, 3, DrawKind::Floored);
    std::vector<int64_t> kept = reducedShape(c.x, c.axes, true);
    OwnedTensor y(DType::F32, kept);
    AttributeList a = attrs({intAttr("keepdims", 1)});
    if (!c.axes.empty())
      a.set(intsAttr("axes", c.axes));
    ASSERT_NO_ERROR(
        runCpu(cpu::lookupKernel("ReduceMax"), "ReduceMax", a, {&x}, {&y}, 13));
    OwnedTensor dy = randomTensor(DType::F32, kept, rng, -1, 1);
    OwnedTensor want(DType::F32, c.x);
    ASSERT_NO_ERROR(runCpu(cpu::lookupZincKernel("ReduceMaxGrad"),
                           "ReduceMaxGrad", attrs({}), {&x, &y, &dy}, {&want}));
    // As the kernel sees it: reduced where y has 1 and x does not.
    llvm::SmallVector<bool, 8> red(c.x.size());
    for (size_t d = 0; d < c.x.size(); ++d)
      red[d] = kept[d] != c.x[d];
    ReducePlan p;
    ASSERT_TRUE(planReduce(c.x, red, p));
    std::vector<double> xs = x.f32s(), ys = y.f32s(), gs = dy.f32s();
    std::vector<double> ws = want.f32s();
    for (int64_t o = 0; o < p.outCount; ++o) {
      int64_t ties = 0, base = reduceBase(p, o);
      for (int64_t r = 0; r < p.redCount; ++r)
        ties += float(xs[base + reduceOffset(p, r)]) == float(ys[o]);
      for (int64_t r = 0; r < p.redCount; ++r) {
        int64_t k = base + reduceOffset(p, r);
        EXPECT_EQ(misc::reduceMaxGradValue(float(xs[k]), float(ys[o]),
                                           float(gs[o]), ties),
                  float(ws[k]))
            << "element " << k;
      }
    }
  }
}

//===----------------------------------------------------------------------===//
// Argument checks, before any CUDA call
//===----------------------------------------------------------------------===//

TEST(CudaReduceMaxNoDevice, BadCallsFailBeforeLaunching) {
  DeviceTensor x = shapeOnly(DType::F32, {4, 5});
  DeviceTensor r3 = shapeOnly(DType::F32, {3});
  AttributeList axis0 = attrs({intsAttr("axes", {0}), intAttr("keepdims", 0)});
  EXPECT_EQ(errorText(runUnlaunched(runReduceMax, "ReduceMax", axis0, {&x},
                                    {&r3}, 13)),
            "ReduceMax: output shape [3], expected [5]");
  EXPECT_EQ(
      errorText(runUnlaunched(runReduceMax, "ReduceMax",
                              attrs({intsAttr("axes", {2})}), {&x}, {&r3}, 13)),
      "axis 2 is out of range for rank 2");
  DeviceTensor h5 = shapeOnly(DType::F16, {5});
  EXPECT_EQ(errorText(runUnlaunched(runReduceMax, "ReduceMax", axis0, {&x},
                                    {&h5}, 13)),
            "ReduceMax: output element type f16 differs from input f32");
  DeviceTensor b = shapeOnly(DType::Bool, {4, 5}),
               b5 = shapeOnly(DType::Bool, {5});
  EXPECT_EQ(errorText(runUnlaunched(runReduceMax, "ReduceMax", axis0, {&b},
                                    {&b5}, 13)),
            "unsupported: ReduceMax with element type bool");
  DeviceTensor u = shapeOnly(DType::U8, {4, 5}), u5 = shapeOnly(DType::U8, {5});
  EXPECT_EQ(errorText(runUnlaunched(runReduceMax, "ReduceMax", axis0, {&u},
                                    {&u5}, 13)),
            "unsupported: ReduceMax of u8 on the cuda backend (f32, f16, bf16, "
            "i32, i64)");
  DeviceTensor faxes = shapeOnly(DType::F32, {1});
  EXPECT_EQ(errorText(runUnlaunched(runReduceMax, "ReduceMax",
                                    attrs({intAttr("keepdims", 0)}),
                                    {&x, &faxes}, {&r3}, 18)),
            "unsupported: ReduceMax with axes of f32 on the cuda backend (i32, "
            "i64)");
  DeviceTensor noAxes = shapeOnly(DType::I64, {0});
  EXPECT_EQ(errorText(runUnlaunched(runReduceMax, "ReduceMax",
                                    attrs({intAttr("noop_with_empty_axes", 1)}),
                                    {&x, &noAxes}, {&r3}, 18)),
            "ReduceMax: noop reduction changes the shape [4,5] to [3]");

  DeviceTensor y = shapeOnly(DType::F32, {1, 5}),
               dx = shapeOnly(DType::F32, {4, 5});
  DeviceTensor dx44 = shapeOnly(DType::F32, {4, 4});
  EXPECT_EQ(errorText(runUnlaunched(runReduceMaxGrad, "ReduceMaxGrad",
                                    attrs({}), {&x, &y, &y}, {&dx44})),
            "ReduceMaxGrad: dx has shape [4,4], expected [4,5]");
  DeviceTensor y25 = shapeOnly(DType::F32, {2, 5});
  EXPECT_EQ(errorText(runUnlaunched(runReduceMaxGrad, "ReduceMaxGrad",
                                    attrs({}), {&x, &y25, &y25}, {&dx})),
            "ReduceMaxGrad: y has shape [2,5], not x's [4,5] with reduced axes "
            "of size 1");
  EXPECT_EQ(errorText(runUnlaunched(runReduceMaxGrad, "ReduceMaxGrad",
                                    attrs({}), {&x, &y, &y25}, {&dx})),
            "ReduceMaxGrad: dy has shape [2,5], expected [1,5]");
  DeviceTensor i = shapeOnly(DType::I64, {4, 5});
  EXPECT_EQ(errorText(runUnlaunched(runReduceMaxGrad, "ReduceMaxGrad",
                                    attrs({}), {&i, &i, &i}, {&i})),
            "unsupported: ReduceMaxGrad with element type i64");
  EXPECT_EQ(errorText(runUnlaunched(runReduceMaxGrad, "ReduceMaxGrad",
                                    attrs({}), {&x, &y}, {&dx})),
            "ReduceMaxGrad: expects inputs (x, y, dy) and output dx");
}

TEST(CudaReduceMaxNoDevice, KernelTableHasTheMaxOps) {
  EXPECT_EQ(lookupCudaKernel("", "ReduceMax"), &runReduceMax);
  EXPECT_EQ(lookupCudaKernel("zinc", "ReduceMaxGrad"), &runReduceMaxGrad);
}

//===----------------------------------------------------------------------===//
// With a device: against the cpu kernels
//===----------------------------------------------------------------------===//

class CudaReduceMax : public CudaMiscDevice {};

/// Where the axes come from in a device test.
enum class AxesKind { Attribute, DeviceInput, HostInput };

TEST_F(CudaReduceMax, ReduceMaxMatchesCpu) {
  const AxesCase cases[] = {
      {{300, 17}, {0}, false},      // columns
      {{7, 45}, {1}, true},         // rows
      {{7, 45}, {-1}, false},       // rows, negative axis
      {{3, 5000}, {1}, false},      // long rows
      {{2, 3, 4, 5}, {1, 3}, true}, // generic
      {{2, 3, 4, 5}, {0, 2, 3}, false},
      {{6, 6}, {0}, false},   // ambiguous on the device: axis 0
      {{6, 6}, {-1}, false},  // ambiguous on the device: axis 1
      {{5, 1, 9}, {}, false}, // all axes
      {{40, 3, 33}, {0, 2}, false},
      {{4, 0, 3}, {1}, true}}; // a maximum of nothing: -inf
  const DType types[] = {DType::F32, DType::F16, DType::BF16, DType::I32,
                         DType::I64};
  for (DType dtype : types)
    for (const AxesCase &c : cases)
      for (AxesKind kind :
           {AxesKind::Attribute, AxesKind::DeviceInput, AxesKind::HostInput}) {
        if (c.axes.empty() && kind != AxesKind::Attribute)
          continue; // an empty axes input is the noop test's
        SCOPED_TRACE(dtypeName(dtype).str() + " " + formatShape(c.x) +
                     " axes " + formatShape(c.axes) + " as " +
                     (kind == AxesKind::Attribute     ? "attribute"
                      : kind == AxesKind::DeviceInput ? "device input"
                                                      : "host input"));
        int64_t opset = kind == AxesKind::Attribute ? 13 : 18;
        AttributeList a = attrs({intAttr("keepdims", c.keepdims)});
        if (kind == AxesKind::Attribute && !c.axes.empty())
          a.set(intsAttr("axes", c.axes));
        OwnedTensor x = randomTensor(dtype, c.x, rng, -50, 50,
                                     DrawKind::FlooredForIntegers);
        if (isFloatDType(dtype))
          x = withNaNs(x, 211);
        OwnedTensor axes = OwnedTensor::ints({int64_t(c.axes.size())}, c.axes);
        const OwnedTensor *axesIn =
            kind == AxesKind::Attribute ? nullptr : &axes;
        std::vector<int64_t> outShape = reducedShape(c.x, c.axes, c.keepdims);
        OwnedTensor want(dtype, outShape);
        ASSERT_NO_ERROR(runCpu(cpu::lookupKernel("ReduceMax"), "ReduceMax", a,
                               {&x, axesIn}, {&want}, opset));
        ASSIGN_OR_FAIL(gx, upload(x));
        ASSIGN_OR_FAIL(gaxes, placeOperand(axes, kind == AxesKind::HostInput
                                                     ? PlaceKind::Host
                                                     : PlaceKind::Device));
        ASSIGN_OR_FAIL(gy, allocate(dtype, outShape));
        ASSERT_NO_ERROR(runDevice(runReduceMax, "ReduceMax", a,
                                  {&gx, axesIn ? &gaxes : nullptr}, {&gy},
                                  opset));
        ASSIGN_OR_FAIL(got, download(gy));
        expectValuesClose(got, want, {0, 0}, /*exactInfinities=*/true);
      }
}

TEST_F(CudaReduceMax, NoopReductionCopies) {
  AttributeList a = attrs({intAttr("noop_with_empty_axes", 1)});
  OwnedTensor x = randomTensor(DType::BF16, {3, 7}, rng, -1, 1);
  OwnedTensor axes = OwnedTensor::ints({0}, {});
  ASSIGN_OR_FAIL(gx, upload(x));
  ASSIGN_OR_FAIL(gaxes, upload(axes));
  ASSIGN_OR_FAIL(gy, allocate(DType::BF16, {3, 7}));
  ASSERT_NO_ERROR(
      runDevice(runReduceMax, "ReduceMax", a, {&gx, &gaxes}, {&gy}, 18));
  ASSIGN_OR_FAIL(got, download(gy));
  expectValuesClose(got, x, {0, 0});
}

TEST_F(CudaReduceMax, ReduceMaxGradMatchesCpu) {
  const AxesCase cases[] = {
      {{7, 45}, {1}, true},                                // rows
      {{3, 2000}, {-1}, true},                             // long rows
      {{300, 17}, {0}, true},                              // columns
      {{2, 3, 4, 5}, {1, 3}, true}, {{5, 1, 9}, {}, true}, // everything
      {{4, 6}, {1}, true},          {{3, 4}, {}, true}};
  for (DType dtype : kFloatTypes)
    for (const AxesCase &c : cases) {
      SCOPED_TRACE(dtypeName(dtype).str() + " " + formatShape(c.x) + " axes " +
                   formatShape(c.axes));
      // Few distinct values: ties are common.
      OwnedTensor x = randomTensor(dtype, c.x, rng, 0, 4, DrawKind::Floored);
      std::vector<int64_t> kept = reducedShape(c.x, c.axes, true);
      AttributeList a = attrs({intAttr("keepdims", 1)});
      if (!c.axes.empty())
        a.set(intsAttr("axes", c.axes));
      OwnedTensor y(dtype, kept);
      ASSERT_NO_ERROR(runCpu(cpu::lookupKernel("ReduceMax"), "ReduceMax", a,
                             {&x}, {&y}, 13));
      OwnedTensor dy = randomTensor(dtype, kept, rng, -1, 1);
      OwnedTensor want(dtype, c.x);
      ASSERT_NO_ERROR(runCpu(cpu::lookupZincKernel("ReduceMaxGrad"),
                             "ReduceMaxGrad", attrs({}), {&x, &y, &dy},
                             {&want}));
      ASSIGN_OR_FAIL(gx, upload(x));
      ASSIGN_OR_FAIL(gy, upload(y));
      ASSIGN_OR_FAIL(gdy, upload(dy));
      ASSIGN_OR_FAIL(gdx, allocate(dtype, c.x));
      ASSERT_NO_ERROR(runDevice(runReduceMaxGrad, "ReduceMaxGrad", attrs({}),
                                {&gx, &gy, &gdy}, {&gdx}));
      ASSIGN_OR_FAIL(got, download(gdx));
      // dy / ties in float, rounded once: the cpu's bits.
      expectValuesClose(got, want, {0, 0});
    }
}

} // namespace
