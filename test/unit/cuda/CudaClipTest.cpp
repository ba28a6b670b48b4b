//===- CudaClipTest.cpp - Clip and ClipGrad: cuda vs cpu ------------------===//
//
// On every machine: MiscMath.h's clip formulas against the cpu kernels
// (NaN, infinities, bounds crossed, x exactly on a bound), and the argument
// checks, which fail with the cpu's messages before any CUDA call. With a
// device: both kernels against the cpu kernels in every type they take,
// with the bounds in device memory, in host memory, absent, and (before
// opset 11) as attributes.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/kernels/MiscMath.h"
#include "test/unit/cuda/MiscTestHelpers.h"
#include <cmath>
#include <cstring>
#include <limits>

using namespace zinc;
using namespace zinc::cuda;
using namespace zinc::cuda::misctest;
using cpu::test::attrs;
using cpu::test::floatAttr;

namespace {

const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

/// Equal, or both NaN.
bool sameValue(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || a == b;
}

//===----------------------------------------------------------------------===//
// MiscMath.h on the host
//===----------------------------------------------------------------------===//

TEST(CudaClipMath, ClipMatchesCpu) {
  const std::vector<double> xs = {-5, -1.5, -1, -0.25, 0,    0.5,
                                  2,  2.5,  7,  kNaN,  kInf, -kInf};
  const std::pair<double, double> bounds[] = {
      {-1, 2}, {2, -1} /* crossed: hi wins */, {-kInf, 0.5}, {0, 0}};
  int64_t n = static_cast<int64_t>(xs.size());
  for (auto [lo, hi] : bounds) {
    SCOPED_TRACE("bounds " + std::to_string(lo) + ", " + std::to_string(hi));
    OwnedTensor x = OwnedTensor::f32({n}, xs);
    OwnedTensor l = OwnedTensor::f32({}, {lo}), h = OwnedTensor::f32({}, {hi});
    OwnedTensor y(DType::F32, {n});
    ASSERT_NO_ERROR(runCpu(cpu::lookupKernel("Clip"), "Clip", attrs({}),
                           {&x, &l, &h}, {&y}, 13));
    std::vector<double> want = y.f32s();
    for (int64_t i = 0; i < n; ++i)
      EXPECT_TRUE(sameValue(
          misc::clipValue<float>(float(xs[i]), float(lo), float(hi)), want[i]))
          << "x = " << xs[i] << ": cpu " << want[i];
  }
  // Integers compare in their own type.
  EXPECT_EQ(misc::clipValue<int64_t>(int64_t(1) << 40, -3, 5), 5);
  EXPECT_EQ(misc::clipValue<int32_t>(-7, -3, 5), -3);
}

TEST(CudaClipMath, ClipGradMatchesCpu) {
  // x on a bound gets no gradient (hardtanh_backward's strict bounds).
  const std::vector<double> xs = {-5, -1, -0.999, 0, 1.999, 2, 3, kNaN};
  int64_t n = static_cast<int64_t>(xs.size());
  std::vector<double> dys(n);
  for (int64_t i = 0; i < n; ++i)
    dys[i] = 0.5 + i;
  OwnedTensor x = OwnedTensor::f32({n}, xs), dy = OwnedTensor::f32({n}, dys);
  OwnedTensor l = OwnedTensor::f32({}, {-1}), h = OwnedTensor::f32({}, {2});
  const OwnedTensor *lows[] = {&l, nullptr};
  for (const OwnedTensor *lo : lows) {
    SCOPED_TRACE(lo ? "min -1" : "no min");
    OwnedTensor dx(DType::F32, {n});
    ASSERT_NO_ERROR(runCpu(cpu::lookupZincKernel("ClipGrad"), "ClipGrad",
                           attrs({}), {&x, &dy, lo, &h}, {&dx}));
    std::vector<double> want = dx.f32s();
    float lf = lo ? -1.0f : -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < n; ++i)
      EXPECT_TRUE(sameValue(
          misc::clipGradValue<float>(float(xs[i]), float(dys[i]), lf, 2.0f),
          want[i]))
          << "x = " << xs[i] << ": cpu " << want[i];
  }
}

//===----------------------------------------------------------------------===//
// Argument checks, before any CUDA call
//===----------------------------------------------------------------------===//

TEST(CudaClipNoDevice, BadCallsFailBeforeLaunching) {
  DeviceTensor x = shapeOnly(DType::F32, {4, 5});
  DeviceTensor y = shapeOnly(DType::F32, {4, 5});
  DeviceTensor y16 = shapeOnly(DType::F16, {4, 5});
  DeviceTensor y44 = shapeOnly(DType::F32, {4, 4});
  DeviceTensor min16 = shapeOnly(DType::F16, {});
  DeviceTensor max2 = shapeOnly(DType::F32, {2});
  EXPECT_EQ(
      errorText(runUnlaunched(runClip, "Clip", attrs({}), {&x}, {&y16}, 13)),
      "Clip: element types f32 and f16 differ");
  EXPECT_EQ(
      errorText(runUnlaunched(runClip, "Clip", attrs({}), {&x}, {&y44}, 13)),
      "Clip: output shape [4,4] differs from input shape [4,5]");
  EXPECT_EQ(errorText(runUnlaunched(runClip, "Clip", attrs({}), {&x, &min16},
                                    {&y}, 13)),
            "Clip: min has element type f16, expected f32");
  EXPECT_EQ(errorText(runUnlaunched(runClip, "Clip", attrs({}),
                                    {&x, nullptr, &max2}, {&y}, 13)),
            "Clip: max must be a scalar, has shape [2]");
  DeviceTensor b = shapeOnly(DType::Bool, {3});
  EXPECT_EQ(
      errorText(runUnlaunched(runClip, "Clip", attrs({}), {&b}, {&b}, 13)),
      "unsupported: Clip with element type bool");
  DeviceTensor i8 = shapeOnly(DType::I8, {3});
  EXPECT_EQ(
      errorText(runUnlaunched(runClip, "Clip", attrs({}), {&i8}, {&i8}, 13)),
      "unsupported: Clip of i8 on the cuda backend (f32, f16, bf16, f64, "
      "i32, i64)");
  EXPECT_EQ(errorText(runUnlaunched(runClip, "Clip", attrs({}), {}, {&y}, 13)),
            "Clip: expects input 0 and output 0");

  EXPECT_EQ(errorText(runUnlaunched(runClipGrad, "ClipGrad", attrs({}),
                                    {&x, &y44}, {&y})),
            "ClipGrad: shapes [4,5] and [4,4] differ");
  EXPECT_EQ(errorText(runUnlaunched(runClipGrad, "ClipGrad", attrs({}),
                                    {&x, &y}, {&y16})),
            "ClipGrad: element types f32 and f16 differ");
  DeviceTensor i64 = shapeOnly(DType::I64, {4, 5});
  EXPECT_EQ(errorText(runUnlaunched(runClipGrad, "ClipGrad", attrs({}),
                                    {&i64, &i64}, {&i64})),
            "unsupported: ClipGrad with element type i64");
  EXPECT_EQ(errorText(runUnlaunched(runClipGrad, "ClipGrad", attrs({}),
                                    {&x, &y, &max2}, {&y})),
            "ClipGrad: min must be a scalar of type f32, has type f32 and "
            "shape [2]");
  EXPECT_EQ(
      errorText(runUnlaunched(runClipGrad, "ClipGrad", attrs({}), {&x}, {&y})),
      "ClipGrad: expects inputs (value, dy) and output dx");
}

TEST(CudaClipNoDevice, EmptyTensorsQueueNothing) {
  // Neither a bound nor the device is touched for no elements.
  DeviceTensor x = shapeOnly(DType::F32, {0, 5});
  EXPECT_EQ(
      errorText(runUnlaunched(runClip, "Clip", attrs({}), {&x}, {&x}, 13)), "");
  EXPECT_EQ(errorText(runUnlaunched(runClipGrad, "ClipGrad", attrs({}),
                                    {&x, &x}, {&x})),
            "");
}

TEST(CudaClipNoDevice, KernelTableHasTheClipOps) {
  EXPECT_EQ(lookupCudaKernel("", "Clip"), &runClip);
  EXPECT_EQ(lookupCudaKernel("zinc", "ClipGrad"), &runClipGrad);
}

//===----------------------------------------------------------------------===//
// With a device: against the cpu kernels
//===----------------------------------------------------------------------===//

class CudaClip : public CudaMiscDevice {};

TEST_F(CudaClip, ClipMatchesCpuInEveryType) {
  const DType types[] = {DType::F32, DType::F16, DType::BF16,
                         DType::F64, DType::I32, DType::I64};
  // Which bounds are given: both, min only, max only, none.
  const std::pair<bool, bool> given[] = {
      {true, true}, {true, false}, {false, true}, {false, false}};
  for (DType dtype : types)
    for (auto [hasLo, hasHi] : given)
      for (PlaceKind where : {PlaceKind::Device, PlaceKind::Host}) {
        SCOPED_TRACE(dtypeName(dtype).str() + (hasLo ? " min" : "") +
                     (hasHi ? " max" : "") + " in " + placeName(where) +
                     " memory");
        // 1000 elements and an odd tail; bounds inside the range, and
        // integers drawn on the bounds too.
        OwnedTensor x = randomTensor(dtype, {37, 29}, rng, -4, 4,
                                     DrawKind::FlooredForIntegers);
        OwnedTensor lo = tensorOf(dtype, {}, {-1.5});
        OwnedTensor hi = tensorOf(dtype, {}, {2.25});
        const OwnedTensor *l = hasLo ? &lo : nullptr,
                          *h = hasHi ? &hi : nullptr;
        OwnedTensor want(dtype, {37, 29});
        ASSERT_NO_ERROR(runCpu(cpu::lookupKernel("Clip"), "Clip", attrs({}),
                               {&x, l, h}, {&want}, 13));
        ASSIGN_OR_FAIL(gx, upload(x));
        ASSIGN_OR_FAIL(glo, placeOperand(lo, where));
        ASSIGN_OR_FAIL(ghi, placeOperand(hi, where));
        ASSIGN_OR_FAIL(gy, allocate(dtype, {37, 29}));
        ASSERT_NO_ERROR(runDevice(
            runClip, "Clip", attrs({}),
            {&gx, hasLo ? &glo : nullptr, hasHi ? &ghi : nullptr}, {&gy}, 13));
        ASSIGN_OR_FAIL(got, download(gy));
        expectValuesClose(got, want, {0, 0}, /*exactInfinities=*/true);
      }
}

TEST_F(CudaClip, ClipBeforeOpset11TakesAttributes) {
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(dtypeName(dtype).str());
    AttributeList a = attrs({floatAttr("min", -0.3), floatAttr("max", 0.7)});
    OwnedTensor x = randomTensor(dtype, {5, 300}, rng, -2, 2);
    OwnedTensor want(dtype, {5, 300});
    ASSERT_NO_ERROR(
        runCpu(cpu::lookupKernel("Clip"), "Clip", a, {&x}, {&want}, 6));
    ASSIGN_OR_FAIL(gx, upload(x));
    ASSIGN_OR_FAIL(gy, allocate(dtype, {5, 300}));
    ASSERT_NO_ERROR(runDevice(runClip, "Clip", a, {&gx}, {&gy}, 6));
    ASSIGN_OR_FAIL(got, download(gy));
    expectValuesClose(got, want, {0, 0});
  }
}

TEST_F(CudaClip, ClipInPlaceAndSpecialValues) {
  std::vector<double> values = {kNaN, kInf, -kInf, -1, 1, 0.5, -0.0, 3};
  OwnedTensor x = OwnedTensor::f32({8}, values);
  OwnedTensor lo = OwnedTensor::f32({}, {-0.5}), hi = OwnedTensor::f32({}, {2});
  OwnedTensor want(DType::F32, {8});
  ASSERT_NO_ERROR(runCpu(cpu::lookupKernel("Clip"), "Clip", attrs({}),
                         {&x, &lo, &hi}, {&want}, 13));
  ASSIGN_OR_FAIL(gx, upload(x));
  ASSIGN_OR_FAIL(glo, upload(lo));
  DeviceTensor hhi = hostView(hi);
  ASSERT_NO_ERROR(
      runDevice(runClip, "Clip", attrs({}), {&gx, &glo, &hhi}, {&gx}, 13));
  ASSIGN_OR_FAIL(got, download(gx));
  expectValuesClose(got, want, {0, 0}, /*exactInfinities=*/true);
}

TEST_F(CudaClip, ClipGradMatchesCpu) {
  for (DType dtype : {DType::F32, DType::F16, DType::BF16, DType::F64})
    for (PlaceKind where : {PlaceKind::Device, PlaceKind::Host})
      for (bool hasLo : {true, false}) {
        SCOPED_TRACE(dtypeName(dtype).str() + (hasLo ? " min" : "") + " in " +
                     placeName(where) + " memory");
        // Halves, so that many elements lie exactly on a bound.
        std::vector<double> xs(41 * 23);
        std::uniform_int_distribution<int> pick(-8, 8);
        for (double &v : xs)
          v = pick(rng) / 2.0;
        OwnedTensor x = tensorOf(dtype, {41, 23}, xs);
        OwnedTensor dy = randomTensor(dtype, {41, 23}, rng, -1, 1);
        OwnedTensor lo = tensorOf(dtype, {}, {-1});
        OwnedTensor hi = tensorOf(dtype, {}, {2.5});
        const OwnedTensor *l = hasLo ? &lo : nullptr;
        OwnedTensor want(dtype, {41, 23});
        ASSERT_NO_ERROR(runCpu(cpu::lookupZincKernel("ClipGrad"), "ClipGrad",
                               attrs({}), {&x, &dy, l, &hi}, {&want}));
        ASSIGN_OR_FAIL(gx, upload(x));
        ASSIGN_OR_FAIL(gdy, upload(dy));
        ASSIGN_OR_FAIL(glo, placeOperand(lo, where));
        ASSIGN_OR_FAIL(ghi, placeOperand(hi, where));
        ASSIGN_OR_FAIL(gdx, allocate(dtype, {41, 23}));
        ASSERT_NO_ERROR(runDevice(runClipGrad, "ClipGrad", attrs({}),
                                  {&gx, &gdy, hasLo ? &glo : nullptr, &ghi},
                                  {&gdx}));
        ASSIGN_OR_FAIL(got, download(gdx));
        expectValuesClose(got, want, {0, 0});
      }
}

} // namespace
