//===- CudaTriluTest.cpp - Trilu: cuda vs cpu -----------------------------===//
//
// On every machine: MiscMath.h's rule for which elements Trilu keeps,
// against the cpu kernel for every diagonal of a few shapes (huge k
// included), and the argument checks, which fail with the cpu's messages
// before any CUDA call. With a device: the kernel against the cpu kernel
// for elements of 1, 2, 4 and 8 bytes, k absent, in device memory and in
// host memory, and in place.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/kernels/MiscMath.h"
#include "test/unit/cuda/MiscTestHelpers.h"
#include <limits>

using namespace zinc;
using namespace zinc::cuda;
using namespace zinc::cuda::misctest;
using cpu::test::attrs;
using cpu::test::intAttr;

namespace {

const int64_t kMin = std::numeric_limits<int64_t>::min();
const int64_t kMax = std::numeric_limits<int64_t>::max();

//===----------------------------------------------------------------------===//
// MiscMath.h on the host
//===----------------------------------------------------------------------===//

TEST(CudaTriluMath, KeptElementsMatchCpu) {
  const std::vector<int64_t> shapes[] = {{4, 6}, {2, 5, 3}, {1, 1}, {3, 1, 7}};
  const int64_t ks[] = {kMin, -100, -4, -1, 0, 1, 2, 5, 100, kMax};
  for (const auto &shape : shapes)
    for (int64_t k : ks)
      for (bool upper : {false, true}) {
        SCOPED_TRACE(formatShape(shape) + " k " + std::to_string(k) +
                     (upper ? " upper" : " lower"));
        // Values 1..n, so a kept element is nonzero.
        int64_t n = numElements(shape);
        OwnedTensor x(DType::I64, shape);
        for (int64_t e = 0; e < n; ++e)
          x.ref.as<int64_t>()[e] = e + 1;
        OwnedTensor kt = OwnedTensor::ints({}, {k});
        OwnedTensor y(DType::I64, shape);
        ASSERT_NO_ERROR(runCpu(cpu::lookupKernel("Trilu"), "Trilu",
                               attrs({intAttr("upper", upper)}), {&x, &kt},
                               {&y}));
        int64_t rows = shape[shape.size() - 2], cols = shape.back();
        for (int64_t e = 0; e < n; ++e) {
          int64_t i, j;
          misc::triluPosition(e, rows, cols, i, j);
          EXPECT_EQ(misc::triluKeeps(i, j, k, upper, rows, cols),
                    y.ref.as<int64_t>()[e] != 0)
              << "element " << e << " (" << i << ", " << j << ")";
        }
      }
}

//===----------------------------------------------------------------------===//
// Argument checks, before any CUDA call
//===----------------------------------------------------------------------===//

TEST(CudaTriluNoDevice, BadCallsFailBeforeLaunching) {
  DeviceTensor v = shapeOnly(DType::F32, {5});
  EXPECT_EQ(errorText(runUnlaunched(runTrilu, "Trilu", attrs({}), {&v}, {&v})),
            "Trilu: input must have rank >= 2, it has shape [5]");
  DeviceTensor x = shapeOnly(DType::F32, {4, 5});
  DeviceTensor y = shapeOnly(DType::F32, {4, 5});
  DeviceTensor y16 = shapeOnly(DType::F16, {4, 5});
  DeviceTensor y54 = shapeOnly(DType::F32, {5, 4});
  EXPECT_EQ(
      errorText(runUnlaunched(runTrilu, "Trilu", attrs({}), {&x}, {&y16})),
      "Trilu: input has type f32 but output has type f16");
  EXPECT_EQ(
      errorText(runUnlaunched(runTrilu, "Trilu", attrs({}), {&x}, {&y54})),
      "Trilu: output shape [5,4] differs from the expected [4,5]");
  DeviceTensor k2 = shapeOnly(DType::I64, {2});
  EXPECT_EQ(
      errorText(runUnlaunched(runTrilu, "Trilu", attrs({}), {&x, &k2}, {&y})),
      "Trilu: k must be a scalar");
  DeviceTensor kf = shapeOnly(DType::F32, {});
  EXPECT_EQ(
      errorText(runUnlaunched(runTrilu, "Trilu", attrs({}), {&x, &kf}, {&y})),
      "unsupported: Trilu with k of f32 on the cuda backend (i32, i64)");
  EXPECT_EQ(errorText(runUnlaunched(runTrilu, "Trilu", attrs({}), {}, {&y})),
            "Trilu: input 0 is missing");
  // No elements: nothing is read or queued.
  DeviceTensor e = shapeOnly(DType::F32, {3, 0, 4});
  EXPECT_EQ(errorText(runUnlaunched(runTrilu, "Trilu", attrs({}), {&e}, {&e})),
            "");
}

TEST(CudaTriluNoDevice, KernelTableHasTrilu) {
  EXPECT_EQ(lookupCudaKernel("", "Trilu"), &runTrilu);
}

//===----------------------------------------------------------------------===//
// With a device: against the cpu kernel
//===----------------------------------------------------------------------===//

class CudaTrilu : public CudaMiscDevice {};

TEST_F(CudaTrilu, TriluMatchesCpu) {
  const std::vector<int64_t> shapes[] = {
      {5, 7}, {3, 6, 4}, {2, 1, 9}, {2, 33, 65}};
  const int64_t ks[] = {-3, 0, 1, 100, kMin};
  const DType types[] = {DType::U8, DType::F16, DType::F32, DType::I64};
  for (DType dtype : types)
    for (const auto &shape : shapes)
      for (int64_t k : ks)
        for (bool upper : {false, true})
          for (PlaceKind where : {PlaceKind::Device, PlaceKind::Host}) {
            SCOPED_TRACE(dtypeName(dtype).str() + " " + formatShape(shape) +
                         " k " + std::to_string(k) + " in " + placeName(where) +
                         " memory" + (upper ? " upper" : " lower"));
            AttributeList a = attrs({intAttr("upper", upper)});
            OwnedTensor x = randomTensor(dtype, shape, rng, 1, 100,
                                         DrawKind::FlooredForIntegers);
            OwnedTensor kt = OwnedTensor::ints({}, {k});
            OwnedTensor want(dtype, shape);
            ASSERT_NO_ERROR(runCpu(cpu::lookupKernel("Trilu"), "Trilu", a,
                                   {&x, &kt}, {&want}));
            ASSIGN_OR_FAIL(gx, upload(x));
            ASSIGN_OR_FAIL(gk, placeOperand(kt, where));
            ASSIGN_OR_FAIL(gy, allocate(dtype, shape));
            ASSERT_NO_ERROR(runDevice(runTrilu, "Trilu", a, {&gx, &gk}, {&gy}));
            ASSIGN_OR_FAIL(got, download(gy));
            expectValuesClose(got, want, {0, 0});
          }
}

TEST_F(CudaTrilu, DefaultDiagonalInt32KAndInPlace) {
  OwnedTensor x = randomTensor(DType::BF16, {3, 9, 9}, rng, -1, 1);
  // No k: the main diagonal, upper by default.
  OwnedTensor want(DType::BF16, {3, 9, 9});
  ASSERT_NO_ERROR(
      runCpu(cpu::lookupKernel("Trilu"), "Trilu", attrs({}), {&x}, {&want}));
  ASSIGN_OR_FAIL(gx, upload(x));
  ASSERT_NO_ERROR(runDevice(runTrilu, "Trilu", attrs({}), {&gx}, {&gx}));
  ASSIGN_OR_FAIL(got, download(gx));
  expectValuesClose(got, want, {0, 0});

  // An i32 k read on the device.
  OwnedTensor k32 = tensorOf(DType::I32, {1}, {-2});
  AttributeList lower = attrs({intAttr("upper", 0)});
  OwnedTensor wantLower(DType::BF16, {3, 9, 9});
  ASSERT_NO_ERROR(runCpu(cpu::lookupKernel("Trilu"), "Trilu", lower, {&x, &k32},
                         {&wantLower}));
  ASSIGN_OR_FAIL(gx2, upload(x));
  ASSIGN_OR_FAIL(gk, upload(k32));
  ASSIGN_OR_FAIL(gy, allocate(DType::BF16, {3, 9, 9}));
  ASSERT_NO_ERROR(runDevice(runTrilu, "Trilu", lower, {&gx2, &gk}, {&gy}));
  ASSIGN_OR_FAIL(gotLower, download(gy));
  expectValuesClose(gotLower, wantLower, {0, 0});
}

} // namespace
